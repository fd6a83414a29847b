// Types of build.mjs, which stays plain JavaScript so that `npm start` runs it before anything is compiled.

/** Compiles src/ and gen/ into dist/ and marks the build current; throws when TypeScript reports an error. */
export function build(): void;

/** Builds unless the last successful build is newer than every source. */
export function buildIfStale(): void;
