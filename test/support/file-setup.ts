import { forgetFileDatabase } from "./database.js";

/*
 * Runs before each test file (vitest.config.ts, setupFiles). The in-process tiers do not isolate
 * their files: the files of one worker share the modules they import, which each would otherwise
 * load afresh (about 1.5 s of a 2-core host's time per file). What a file must not share is set
 * up again here.
 */

forgetFileDatabase();
