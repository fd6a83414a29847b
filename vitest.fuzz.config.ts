import { defineConfig } from "vitest/config";

/** `npm run test:fuzz`: the property-based fuzz suite against one real server process (docs/reliability.md). */
export default defineConfig({
  test: {
    include: ["test/fuzz/**/*.fuzz.ts"],
    testTimeout: 30 * 60_000,
    hookTimeout: 5 * 60_000,
    pool: "forks",
    fileParallelism: false,
  },
});
