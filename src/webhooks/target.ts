import { lookup as dnsLookup } from "node:dns";
import { BlockList, isIP, type LookupFunction } from "node:net";

/** IPv6 ranges that carry an IPv4 address in their last 32 bits: IPv4-mapped and the NAT64 well-known prefix. */
const ipv4Within = new BlockList();
ipv4Within.addSubnet("::ffff:0:0", 96, "ipv6");
ipv4Within.addSubnet("64:ff9b::", 96, "ipv6");

/** Addresses no webhook may ever reach: unspecified, link-local (cloud metadata lives there) and metadata services. */
const neverReachable = new BlockList();
neverReachable.addSubnet("0.0.0.0", 8, "ipv4");
neverReachable.addSubnet("169.254.0.0", 16, "ipv4");
neverReachable.addAddress("100.100.100.200", "ipv4");
neverReachable.addAddress("::", "ipv6");
neverReachable.addSubnet("fe80::", 10, "ipv6");
neverReachable.addAddress("fd00:ec2::254", "ipv6");

/** Addresses that are not on the public internet: production events are never sent there. */
const notPublic = new BlockList();
for (const [network, prefix] of [
  ["0.0.0.0", 8],
  ["10.0.0.0", 8],
  ["100.64.0.0", 10],
  ["127.0.0.0", 8],
  ["169.254.0.0", 16],
  ["172.16.0.0", 12],
  ["192.0.0.0", 24],
  ["192.168.0.0", 16],
  ["198.18.0.0", 15],
  ["224.0.0.0", 3],
] as const) {
  notPublic.addSubnet(network, prefix, "ipv4");
}
for (const [network, prefix] of [
  ["::", 127],
  ["fc00::", 7],
  ["fe80::", 10],
  ["ff00::", 8],
  ["100::", 64],
  ["2001:db8::", 32],
] as const) {
  notPublic.addSubnet(network, prefix, "ipv6");
}

/** The IPv4 address in the last 32 bits of an IPv6 address, e.g. 169.254.169.254 in 64:ff9b::a9fe:a9fe. */
function embeddedIpv4(address: string): string {
  const groups = address.split(":");
  const [high, low] = groups.slice(-2).map((group) => Number.parseInt(group || "0", 16));
  return [high! >> 8, high! & 255, low! >> 8, low! & 255].join(".");
}

/**
 * An IPv4 address written as IPv6 is judged as the IPv4 address it is: mapped (::ffff:10.0.0.1) or
 * behind NAT64 (64:ff9b::a9fe:a9fe is 169.254.169.254), which a NAT64 gateway would connect to.
 */
function normalized(address: string): { address: string; family: "ipv4" | "ipv6" } {
  if (isIP(address) === 4) return { address, family: "ipv4" };
  const dotted = /^(?:::ffff:|64:ff9b::)(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (dotted !== null) return { address: dotted[1]!, family: "ipv4" };
  if (ipv4Within.check(address, "ipv6")) return { address: embeddedIpv4(address), family: "ipv4" };
  return { address, family: "ipv6" };
}

/** Why a delivery of an event of this environment may not go to `address`, or undefined if it may. */
export function refusalOf(address: string, livemode: boolean): string | undefined {
  const { address: plain, family } = normalized(address);
  if (neverReachable.check(plain, family)) return `webhook_url resolves to ${address}, a link-local or metadata address`;
  if (livemode && notPublic.check(plain, family)) {
    return `webhook_url resolves to ${address}, which is not a public address; production events go to public https URLs only`;
  }
  return undefined;
}

/** The host of a URL as an address or a name to resolve (brackets of an IPv6 literal removed). */
export function hostOf(url: URL): string {
  return url.hostname.replace(/^\[(.*)\]$/, "$1");
}

/**
 * A DNS lookup for the delivery's connection that refuses the whole name when any address it resolves
 * to is refused (`refusalOf`). The connection then uses the very address checked here, so a name
 * that resolves to something else a moment later (DNS rebinding) never gets through.
 */
export function checkedLookup(livemode: boolean): LookupFunction {
  return (hostname, options, callback) => {
    dnsLookup(hostname, { ...options, all: true }, (error, addresses) => {
      if (error !== null) return callback(error, "", 0);
      const refusal = addresses.map((a) => refusalOf(a.address, livemode)).find((r) => r !== undefined);
      if (refusal !== undefined) return callback(Object.assign(new Error(refusal), { code: "EREFUSEDTARGET" }), "", 0);
      if (options.all === true) return (callback as unknown as (e: null, a: typeof addresses) => void)(null, addresses);
      const first = addresses[0]!;
      callback(null, first.address, first.family);
    });
  };
}

/** How long saving a profile waits for its webhook_url's name to resolve before accepting it unresolved. */
const saveLookupMs = 2000;

/** The addresses a name resolves to now; none when it does not resolve (in time). */
function addressesOf(host: string): Promise<string[]> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve([]), saveLookupMs);
    dnsLookup(host, { all: true }, (error, found) => {
      clearTimeout(timer);
      resolve(error === null ? found.map((a) => a.address) : []);
    });
  });
}

/**
 * Why a webhook_url may not be saved, or undefined: a profile serves both environments, so a sandbox
 * URL on a laptop (http, localhost) is fine, but one that reaches a link-local or metadata address
 * never is. A name that does not resolve yet is accepted: the receiver may not be deployed yet.
 */
export async function refusalOfSavedUrl(value: string): Promise<string | undefined> {
  const url = new URL(value);
  if (url.username !== "" || url.password !== "") return "must not carry a user name or password";
  const host = hostOf(url);
  const addresses = isIP(host) !== 0 ? [host] : await addressesOf(host);
  return addresses.map((address) => refusalOf(address, false)).find((r) => r !== undefined);
}
