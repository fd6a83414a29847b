// The entry of the webhook delivery thread (delivery-thread.ts). The service runs its TypeScript
// sources through tsx, whose loader a worker thread does not inherit from `--import`, so the thread
// registers it before it loads its TypeScript body.
import { register } from "tsx/esm/api";

register();
await import("./delivery-worker.ts");
