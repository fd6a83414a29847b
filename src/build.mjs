// The production build: src/ and gen/ compiled by TypeScript into dist/, run with plain `node`
// (docs/operations.md). `npm run build` builds; `npm start` builds only when dist/ is missing or stale.
import { execFileSync } from "node:child_process";
import { readdirSync, statSync, writeFileSync } from "node:fs";
import { fileURLToPath, pathToFileURL } from "node:url";

const root = fileURLToPath(new URL("../", import.meta.url));
/** Written after a build that succeeded: a build that failed half-way is never taken for a current one. */
const stamp = `${root}dist/.built`;

/** The newest modification time of a file under `dir`, in ms. */
function newestUnder(dir) {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (entry.isFile()) newest = Math.max(newest, statSync(`${entry.parentPath}/${entry.name}`).mtimeMs);
  }
  return newest;
}

/** Compiles src/ and gen/ into dist/ and marks the build current; throws when TypeScript reports an error. */
export function build() {
  execFileSync(process.execPath, [`${root}node_modules/.bin/tsc`, "-p", `${root}tsconfig.build.json`], { stdio: "inherit" });
  writeFileSync(stamp, "");
}

/** Builds unless the last successful build is newer than every source. */
export function buildIfStale() {
  let builtAt = -1;
  try {
    builtAt = statSync(stamp).mtimeMs;
  } catch {}
  const sources = Math.max(
    newestUnder(`${root}src`),
    newestUnder(`${root}gen`),
    statSync(`${root}tsconfig.build.json`).mtimeMs,
    statSync(`${root}tsconfig.json`).mtimeMs,
  );
  if (builtAt >= sources) return;
  process.stderr.write("building dist/: it is missing or older than src/ or gen/\n");
  build();
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) build();
