import { defineConfig } from "vitest/config";

/**
 * `npm run test:faults`: the fault and abuse suite (docs/reliability.md), on real PostgreSQL only
 * (DATABASE_URL), one file at a time because its files kill, freeze and flood processes and would
 * disturb each other's timings.
 */
export default defineConfig({
  test: {
    include: ["test/faults/**/*.fault.ts"],
    globalSetup: ["test/faults/global-setup.ts"],
    testTimeout: 10 * 60_000,
    hookTimeout: 2 * 60_000,
    pool: "forks",
    fileParallelism: false,
    env: { LOG_LEVEL: "silent" },
  },
});
