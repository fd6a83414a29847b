/**
 * JSON text written verbatim, for what JSON.stringify cannot produce from a JavaScript value: numbers
 * beyond double precision (2^53+1, 1e400) and nesting thousands of levels deep.
 */
export class RawJson {
  constructor(readonly text: string) {}
}

/** A JSON document under construction: plain JSON values plus verbatim pieces. */
export type JsonTree = null | boolean | number | string | RawJson | readonly JsonTree[] | { readonly [key: string]: JsonTree };

/**
 * Serialises a tree. Strings go through JSON.stringify, which writes a lone surrogate as a `\ud800`
 * escape, so unpaired surrogates reach the server as JSON escapes rather than as replacement bytes.
 */
export function jsonText(tree: JsonTree): string {
  if (tree instanceof RawJson) return tree.text;
  if (Array.isArray(tree)) return `[${tree.map(jsonText).join(",")}]`;
  if (typeof tree === "object" && tree !== null) {
    return `{${Object.entries(tree)
      .map(([key, value]) => `${JSON.stringify(key)}:${jsonText(value)}`)
      .join(",")}}`;
  }
  return JSON.stringify(tree);
}
