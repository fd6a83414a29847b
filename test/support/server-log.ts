/*
 * Reading what a server child process prints: its JSON log lines, and the line that says where it
 * listens. The embedded database also prints plain text, which these skip.
 */

/** The url of the `{"message":"listening","url":…}` line, so a server started on port 0 can be found. */
export function listeningUrl(line: string): string | undefined {
  if (!line.startsWith("{")) return undefined;
  try {
    const entry = JSON.parse(line) as { message?: unknown; url?: unknown };
    return entry.message === "listening" && typeof entry.url === "string" ? entry.url : undefined;
  } catch {
    return undefined;
  }
}

/** Calls `onLine` with each complete line of `stream` (and the unterminated last one at its end), as chunks split lines anywhere. */
export function eachLine(stream: NodeJS.ReadableStream, onLine: (line: string) => void): void {
  let partial = "";
  stream.setEncoding("utf8");
  stream.on("data", (chunk: string) => {
    const lines = (partial + chunk).split("\n");
    partial = lines.pop()!;
    for (const line of lines) onLine(line);
  });
  stream.on("end", () => {
    if (partial !== "") onLine(partial);
  });
}
