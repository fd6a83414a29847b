import { type ChildProcess, spawn } from "node:child_process";
import readline from "node:readline";
import type { BenchMerchant } from "./service.js";

/**
 * Starts bench/limit-server.mjs on `databaseUrl`, writing `merchant`'s payments; resolves once it
 * listens, with its URL. It runs with `node` as the service's production build does.
 */
export async function startLimitServer(databaseUrl: string, merchant: BenchMerchant): Promise<{ url: string; child: ChildProcess }> {
  const script = new URL("./limit-server.mjs", import.meta.url).pathname;
  const child = spawn(process.execPath, [script, databaseUrl, merchant.merchantId, merchant.profileId], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  for await (const line of readline.createInterface({ input: child.stdout! })) {
    const url = /^listening on (\S+)$/.exec(line)?.[1];
    if (url !== undefined) return { url, child };
  }
  throw new Error("the limit server exited before listening");
}
