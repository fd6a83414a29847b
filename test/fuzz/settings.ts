/** How big a fuzz run is and how to replay one, read once from the environment. */
export interface FuzzSettings {
  /** FUZZ_REQUESTS: requests in the whole run (rounded up to whole batches). */
  readonly requests: number;
  /** FUZZ_CONCURRENCY: requests of one batch, all in flight together. */
  readonly concurrency: number;
  /** FUZZ_SEED: fast-check's seed; random unless replaying. */
  readonly seed: number;
  /** FUZZ_PATH: fast-check's counterexample path, to replay one failing batch directly. */
  readonly path: string | undefined;
  /** FUZZ_COLLECT=1: record every distinct violation and go on, instead of stopping at the first. */
  readonly collect: boolean;
  /**
   * FUZZ_SHRINK_SECONDS: how long shrinking may go on after the first failure. A batch that kills
   * the server costs a restart per shrink step, so shrinking is cut off and reports its best so far
   * (replaying with FUZZ_SEED and FUZZ_PATH resumes it).
   */
  readonly shrinkSeconds: number;
}

/** Reads the FUZZ_* variables, failing with the variable's name when a value is unusable. */
export function readSettings(env: NodeJS.ProcessEnv = process.env): FuzzSettings {
  return {
    requests: positiveInteger(env, "FUZZ_REQUESTS", 100_000),
    concurrency: positiveInteger(env, "FUZZ_CONCURRENCY", 32),
    seed: env.FUZZ_SEED === undefined || env.FUZZ_SEED === "" ? randomSeed() : integer(env, "FUZZ_SEED"),
    path: env.FUZZ_PATH === undefined || env.FUZZ_PATH === "" ? undefined : env.FUZZ_PATH,
    collect: env.FUZZ_COLLECT === "1",
    shrinkSeconds: positiveInteger(env, "FUZZ_SHRINK_SECONDS", 120),
  };
}

function randomSeed(): number {
  return Math.floor(Math.random() * 0x7fffffff);
}

function integer(env: NodeJS.ProcessEnv, name: string): number {
  const value = Number(env[name]);
  if (!Number.isSafeInteger(value)) throw new Error(`${name} must be an integer, got "${env[name]}"`);
  return value;
}

function positiveInteger(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  if (env[name] === undefined || env[name] === "") return fallback;
  const value = integer(env, name);
  if (value < 1) throw new Error(`${name} must be at least 1, got "${env[name]}"`);
  return value;
}
