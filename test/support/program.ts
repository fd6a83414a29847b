import { execFile } from "node:child_process";

/** What a program printed and how it exited. */
export interface Ran {
  readonly exitCode: number;
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * Runs a program (a client, a compiler) to its end and resolves with what it printed; never rejects,
 * so a test asserts its exit code with the output beside it. One that cannot start, or outlives two
 * minutes, exits -1 with the reason on stderr.
 */
export function runProgram(file: string, args: string[], options: { env?: NodeJS.ProcessEnv; cwd?: string } = {}): Promise<Ran> {
  return new Promise((resolve) => {
    execFile(file, args, { timeout: 120_000, cwd: options.cwd, env: { ...process.env, ...options.env } }, (error, stdout, stderr) => {
      const exitCode = error === null ? 0 : typeof error.code === "number" ? error.code : -1;
      resolve({ exitCode, stdout, stderr: error !== null && typeof error.code !== "number" ? `${error.message}\n${stderr}` : stderr });
    });
  });
}
