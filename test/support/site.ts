import { createServer, type RequestListener } from "node:http";
import type { AddressInfo } from "node:net";

/** A web site of a test's own on a loopback port: its origin, and a close that drops open connections too. */
export interface Site {
  readonly url: string;
  close(): Promise<void>;
}

/**
 * Serves `handler` on a free loopback port, as a merchant's site the browser (or the service's
 * redirects) can reach: the 3DS flow's return_url, a checkout page on an origin of its own.
 */
export async function startSite(handler: RequestListener): Promise<Site> {
  const server = createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
