import { createServer } from "node:net";
import type { AddressInfo } from "node:net";

/**
 * A loopback port that is free right now, for a process that must be told its port before it
 * starts (a server's own public URL, a database or Redis of a test's own).
 */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once("error", reject);
    probe.listen(0, "127.0.0.1", () => {
      const { port } = probe.address() as AddressInfo;
      probe.close(() => resolve(port));
    });
  });
}
