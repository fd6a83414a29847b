import { execFile } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { runProgram } from "../support/program.js";

/*
 * A client generated from gen/openapi.json by tools that are not ours (openapi-typescript's types,
 * openapi-fetch's calls, checked by the TypeScript 5 they support; test/clients/openapi-typescript,
 * installed by .ci/prepare) accepts the README's REST calls as written and refuses what the service
 * refuses: a payment without an amount, an amount as text or null, an unknown capture method (refused.ts).
 */

const repositoryRoot = path.resolve(import.meta.dirname, "../..");
const project = path.join(import.meta.dirname, "openapi-typescript");
const generated = path.join(project, "generated");
const bin = (name: string) => path.join(project, "node_modules/.bin", name);
const document = JSON.parse(readFileSync(path.join(repositoryRoot, "gen/openapi.json"), "utf8")) as {
  paths: Record<string, Record<string, { parameters?: { name: string; in: string; schema?: { type?: string | string[] } }[] }>>;
};

/** One REST call of the README, as curl was asked to make it (the shell's expansions done). */
interface RecordedCall {
  readonly method: string;
  readonly url: URL;
  readonly body: string | undefined;
}

/**
 * The README's REST calls: its "### REST" block run in bash with a `curl` that records its arguments
 * and answers `{}` instead of calling anything, so the bodies are exactly what the reader's shell sends.
 */
async function readmeCalls(): Promise<RecordedCall[]> {
  const readme = readFileSync(path.join(repositoryRoot, "README.md"), "utf8");
  const from = readme.indexOf("\n### REST\n");
  const block = /```sh\n([\s\S]*?)```/.exec(readme.slice(from))?.[1];
  expect(block, "the README has a REST block").toBeDefined();
  const dir = mkdtempSync(path.join(tmpdir(), "readme-calls-"));
  const record = path.join(dir, "calls");
  try {
    const recorder = `curl() { printf '%s\\0' "$@" "--end-of-call" >> "$RECORD"; echo '{}'; }
field() { cat > /dev/null; echo "id_$1"; }
BASE=http://localhost:8080 KEY=snd_key MER=mer_x PRO=pro_x ADMIN=admin-key
`;
    await promisify(execFile)("bash", ["-c", recorder + block], { env: { ...process.env, RECORD: record } });
    const args = readFileSync(record, "utf8").split("\0");
    const calls: RecordedCall[] = [];
    let current: string[] = [];
    for (const arg of args) {
      if (arg !== "--end-of-call") {
        current.push(arg);
        continue;
      }
      calls.push(asCall(current));
      current = [];
    }
    return calls;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** curl's arguments as the call they make: -X, else POST with -d, else GET. */
function asCall(args: readonly string[]): RecordedCall {
  let method: string | undefined;
  let body: string | undefined;
  let url: URL | undefined;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    if (arg === "-X") method = args[++i];
    else if (arg === "-d") body = args[++i];
    else if (arg === "-H") i++;
    else if (arg.startsWith("http://")) url = new URL(arg);
  }
  if (url === undefined) throw new Error(`a curl without a URL: ${args.join(" ")}`);
  return { method: method ?? (body === undefined ? "GET" : "POST"), url, body };
}

/** The document's path template a concrete path matches, with the values of its variables. */
function templateOf(method: string, pathname: string): { template: string; path: Record<string, string> } {
  const candidates = Object.keys(document.paths).filter((template) => document.paths[template]![method.toLowerCase()] !== undefined);
  // Literal segments win over variables, as the router matches them: fewer variables first.
  candidates.sort((a, b) => (a.match(/\{/g)?.length ?? 0) - (b.match(/\{/g)?.length ?? 0));
  for (const template of candidates) {
    const names: string[] = [];
    const pattern = template.replace(/\{([a-z_]+)\}/g, (_, name: string) => {
      names.push(name);
      return "([^/]+)";
    });
    const match = new RegExp(`^${pattern}$`).exec(pathname);
    if (match !== null) return { template, path: Object.fromEntries(names.map((name, i) => [name, decodeURIComponent(match[i + 1]!)])) };
  }
  throw new Error(`${method} ${pathname} is not in the document`);
}

/** A query parameter's value as the generated type has it: a number or a boolean where the document says so. */
function queryValue(template: string, method: string, name: string, value: string): unknown {
  const parameter = document.paths[template]![method.toLowerCase()]!.parameters?.find((p) => p.in === "query" && p.name === name);
  const type = [parameter?.schema?.type ?? "string"].flat();
  if (type.includes("integer") || type.includes("number")) return Number(value);
  if (type.includes("boolean")) return value === "true";
  return value;
}

/** One call as openapi-fetch writes it, e.g. `client.POST("/payments/{payment_id}/capture", {params: …, body: …})`. */
function asClientCall(call: RecordedCall): string {
  const { template, path: pathValues } = templateOf(call.method, call.url.pathname);
  const params: Record<string, unknown> = {};
  if (Object.keys(pathValues).length > 0) params.path = pathValues;
  const query = [...call.url.searchParams].map(([name, value]) => [name, queryValue(template, call.method, name, value)]);
  if (query.length > 0) params.query = Object.fromEntries(query);
  const init: Record<string, unknown> = {};
  if (Object.keys(params).length > 0) init.params = params;
  const options = [`${JSON.stringify(init).slice(0, -1)}`];
  if (call.body !== undefined) options.push(`${Object.keys(init).length > 0 ? "," : ""}"body":${call.body}`);
  return `  await client.${call.method}(${JSON.stringify(template)}, ${options.join("")}});`;
}

describe("a client generated by openapi-typescript and openapi-fetch", () => {
  it("type-checks the README's REST calls as written, and refuses a payment without an amount", { timeout: 120_000 }, async () => {
    if (!existsSync(bin("openapi-typescript")) || !existsSync(bin("tsc"))) {
      throw new Error(`openapi-typescript and TypeScript 5 are not installed in ${project}: run \`bash .ci/prepare\``);
    }
    rmSync(generated, { recursive: true, force: true });
    mkdirSync(generated);
    const types = await runProgram(
      bin("openapi-typescript"),
      [path.join(repositoryRoot, "gen/openapi.json"), "-o", "generated/schema.d.ts"],
      {
        cwd: project,
      },
    );
    expect(types.exitCode, types.stdout + types.stderr).toBe(0);

    const calls = await readmeCalls();
    // Every REST section of the tour, the admin API and the sandbox clock included.
    expect(calls.length).toBeGreaterThan(60);
    const file = [
      'import createClient from "openapi-fetch";',
      'import type { paths } from "./schema.js";',
      "",
      "// The README's REST calls (test/clients/openapi-fetch.test.ts writes this file from the README).",
      'const client = createClient<paths>({ baseUrl: "http://localhost:8080" });',
      "",
      "export async function readme(): Promise<void> {",
      ...calls.map(asClientCall),
      "}",
      "",
    ].join("\n");
    writeFileSync(path.join(generated, "readme-calls.ts"), file);

    const checked = await runProgram(bin("tsc"), ["-p", "tsconfig.json"], { cwd: project });
    expect(checked.stdout + checked.stderr, file).toBe("");
    expect(checked.exitCode).toBe(0);
  });
});
