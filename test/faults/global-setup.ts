import type { TestProject } from "vitest/node";
import setupTests from "../support/global-setup.js";

/** The fault suite proves what happens on real PostgreSQL: without DATABASE_URL it refuses to run rather than pass vacuously. */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  if (process.env.DATABASE_URL === undefined) {
    throw new Error("npm run test:faults needs DATABASE_URL: a PostgreSQL database it may clone per file (see README)");
  }
  return setupTests(project);
}
