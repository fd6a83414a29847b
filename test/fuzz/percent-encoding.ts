const unreserved = /[A-Za-z0-9\-._~]/;

/**
 * Percent-encodes text as UTF-8 for a path segment or query value. Unlike encodeURIComponent it
 * never throws: a lone surrogate becomes the replacement character's bytes.
 */
export function percentEncode(text: string): string {
  let out = "";
  for (const byte of Buffer.from(text, "utf8")) {
    const char = String.fromCharCode(byte);
    out += byte < 0x80 && unreserved.test(char) ? char : `%${byte.toString(16).toUpperCase().padStart(2, "0")}`;
  }
  return out;
}
