// Preloaded into a spawned server (NODE_OPTIONS=--import=…): as the process exits, prints on stderr
// how many OpenTelemetry modules it resolved. Module resolution hooks see every import, tsx's
// included, where require's cache would miss modules loaded through tsx. Plain JavaScript: it loads
// before tsx does.
import { register } from "node:module";
import { isMainThread, MessageChannel } from "node:worker_threads";

/** Runs in the loader's own thread: tells the process of each OpenTelemetry module resolved. */
const hook = `
let port;
export function initialize(data) { port = data.port; }
export async function resolve(specifier, context, next) {
  const resolved = await next(specifier, context);
  if (resolved.url.includes("/node_modules/@opentelemetry/")) port.postMessage(resolved.url);
  return resolved;
}`;

// NODE_OPTIONS preloads this into every thread, the loaders' own included: the process is the main one.
if (isMainThread) {
  const { port1, port2 } = new MessageChannel();
  const loaded = new Set();
  port1.on("message", (url) => loaded.add(url));
  port1.unref();
  register(`data:text/javascript,${encodeURIComponent(hook)}`, { data: { port: port2 }, transferList: [port2] });
  process.on("exit", () => {
    process.stderr.write(`opentelemetry modules loaded: ${loaded.size}\n`);
  });
}
