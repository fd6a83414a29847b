import { availableParallelism } from "node:os";
import { defineConfig } from "vitest/config";

/*
 * The suite's tiers (docs/testing.md), each a vitest project: `npm test` runs unit, parity and
 * service, the tiers that run in the test process; `npm run test:system` runs the system tier;
 * CI runs every tier (`npx vitest run`).
 */

export default defineConfig({
  test: {
    globalSetup: ["test/support/global-setup.ts"],
    setupFiles: ["test/support/file-setup.ts"],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: "forks",
    // Test files wait on sockets, databases and child processes more than they compute: one per core
    // (vitest's default is one fewer, a single file at a time on the 2-core hosts we build on) keeps
    // the cores busy; docs/testing.md has the figures.
    maxWorkers: Math.max(2, availableParallelism()),
    env: { LOG_LEVEL: "silent" },
    projects: [
      // Every tier shares the modules of a worker between its files (file-setup.ts says what each
      // file still gets of its own): loading them afresh for each file took a third of `npm test`'s
      // time (docs/testing.md).
      { extends: true, test: { name: "unit", include: ["src/**/*.spec.ts"], isolate: false } },
      { extends: true, test: { name: "parity", include: ["test/parity/**/*.test.ts"], isolate: false } },
      { extends: true, test: { name: "service", include: ["test/*.test.ts", "test/in-process/**/*.test.ts"], isolate: false } },
      // What runs other programs — server processes, builds, browsers, other languages' and tools'
      // clients, the README's tour — and is slow for it, where the service tier runs the service in
      // the test process. A folder of its own, not a list to exclude: a project's `exclude` would
      // replace the ones CI passes on the command line.
      {
        extends: true,
        test: { name: "system", include: ["test/system/**/*.test.ts", "test/clients/**/*.test.ts"], isolate: false },
      },
    ],
    // `npm run test:coverage`: line and branch coverage of src/ by what runs in the test processes
    // (servers the tests spawn as processes of their own are not measured); docs/testing.md.
    coverage: {
      provider: "v8",
      include: ["src/**/*.ts"],
      exclude: ["src/**/*.spec.ts"],
      reporter: ["text-summary", "json-summary"],
      reportsDirectory: "coverage",
    },
  },
});
