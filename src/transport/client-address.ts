import { isIP } from "node:net";

/**
 * The address a request's limits are counted under (docs/rate-limits.md). By default the TCP peer:
 * a client can put anything in X-Forwarded-For, so the header counts only when the peer is one of
 * TRUSTED_PROXIES, and then only the hops those proxies appended (read from the right, up to the
 * first address that is not a trusted proxy). IPv6 addresses count per /64, the block one
 * subscriber is usually given, so cycling through one's own addresses does not escape the limits.
 */
export class ClientAddresses {
  private readonly trusted: ReadonlySet<string>;

  constructor(trustedProxies: readonly string[]) {
    this.trusted = new Set(trustedProxies.map(normalize));
  }

  /** The counted address of a request from `peer` (the socket's remote address) with this X-Forwarded-For. */
  of(peer: string | undefined, forwardedFor: string | string[] | undefined): string {
    let client = normalize(peer ?? "unknown");
    if (this.trusted.has(client) && forwardedFor !== undefined) {
      const hops = (Array.isArray(forwardedFor) ? forwardedFor.join(",") : forwardedFor).split(",").map((hop) => hop.trim());
      for (let i = hops.length - 1; i >= 0 && this.trusted.has(client); i--) {
        const hop = normalize(hops[i]!);
        // A hop that is not an address was not written by a trusted proxy: the last trusted one is the client.
        if (isIP(hop) === 0) break;
        client = hop;
      }
    }
    return countedAs(client);
  }
}

/** Parses TRUSTED_PROXIES: comma-separated IP addresses; throws naming the first that is not one. */
export function parseTrustedProxies(configured: string | undefined): string[] {
  if (configured === undefined) return [];
  return configured
    .split(",")
    .map((entry) => entry.trim())
    .filter((entry) => entry !== "")
    .map((entry) => {
      if (isIP(normalize(entry)) === 0) throw new Error(`TRUSTED_PROXIES must list IP addresses, got "${entry}"`);
      return entry;
    });
}

/** One spelling per address: IPv4-mapped IPv6 (::ffff:1.2.3.4) is the IPv4 address, zones and brackets go. */
function normalize(address: string): string {
  const bare = address
    .replace(/^\[|\]$/g, "")
    .replace(/%.*$/, "")
    .toLowerCase();
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(bare);
  return mapped === null ? bare : mapped[1]!;
}

/** IPv4 as is; IPv6 as its /64 (first four groups); anything else as given. */
function countedAs(address: string): string {
  if (isIP(address) !== 6) return address;
  const [head = "", tail] = address.split("::");
  const groups = head === "" ? [] : head.split(":");
  if (tail !== undefined) {
    const rest = tail === "" ? [] : tail.split(":");
    // An embedded IPv4 tail stands for two groups.
    const restGroups = rest.reduce((n, group) => n + (group.includes(".") ? 2 : 1), 0);
    groups.push(...Array<string>(8 - groups.length - restGroups).fill("0"), ...rest);
  }
  return `${groups
    .slice(0, 4)
    .map((group) => Number.parseInt(group, 16).toString(16))
    .join(":")}::/64`;
}
