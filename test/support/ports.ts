import { createServer } from "node:net";

/*
 * Below Linux's ephemeral range (32768–60999 by default), which the kernel hands out both for
 * listen(0) and for every outgoing connection: a port found free there can be taken by any client
 * socket of the machine before the process told to use it binds it (seen in CI: HAProxy could not
 * bind its frontend). Ports here are only ever taken by name.
 */
const firstPort = 20_000;
const lastPort = 32_767;

/** Whether `port` on the loopback address can be bound now. */
function bindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = createServer();
    probe.once("error", () => resolve(false));
    probe.listen(port, "127.0.0.1", () => probe.close(() => resolve(true)));
  });
}

/**
 * A loopback port that is free right now, for a process that must be told its port before it
 * starts (a server's own public URL, a load balancer, a database or Redis of a test's own). It is
 * drawn at random outside the ephemeral range, so no outgoing connection takes it meanwhile.
 */
export async function freePort(): Promise<number> {
  for (let tries = 0; tries < 100; tries++) {
    const port = firstPort + Math.floor(Math.random() * (lastPort - firstPort + 1));
    if (await bindable(port)) return port;
  }
  throw new Error(`no free loopback port between ${firstPort} and ${lastPort} after 100 tries`);
}
