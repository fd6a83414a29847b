// `npm start`: the production build (dist/), built first when it is missing or stale, so a clean
// clone starts with one command. The server runs in this very process: a SIGTERM sent to it, or
// forwarded by npm, reaches the server itself.
import { buildIfStale } from "./build.mjs";

buildIfStale();
const { run } = await import("../dist/src/server.js");
run();
