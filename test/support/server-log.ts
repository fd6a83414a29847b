/*
 * Reading what a server child process prints: its JSON log lines, and the line that says where it
 * listens. The embedded database also prints plain text, which these skip.
 */
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";

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

/** A log line as parsed JSON. */
export type LogLine = Record<string, unknown>;

/** The JSON lines of a process's output, skipping the plain text the embedded database prints. */
export function logLines(output: string): LogLine[] {
  return output
    .split("\n")
    .filter((line) => line.startsWith("{"))
    .map((line) => JSON.parse(line) as LogLine);
}

/** Runs `npm run -s <script>` in the repository as a deploy job would, and resolves with its exit code and output once it ends. */
export function runNpmScript(script: string, env: NodeJS.ProcessEnv): Promise<{ code: number | null; output: string }> {
  const child = spawn("npm", ["run", "-s", script], {
    cwd: fileURLToPath(new URL("../../", import.meta.url)),
    env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  for (const stream of [child.stdout, child.stderr]) {
    stream.setEncoding("utf8");
    stream.on("data", (chunk: string) => {
      output += chunk;
    });
  }
  return new Promise((resolve) => child.once("close", (code) => resolve({ code, output })));
}
