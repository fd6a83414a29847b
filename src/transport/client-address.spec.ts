import { describe, expect, it } from "vitest";
import { ClientAddresses, parseTrustedProxies } from "./client-address.js";

/*
 * The address each limit counts a request under: the TCP peer unless the peer is a trusted proxy,
 * whose X-Forwarded-For hops are then read from the right; IPv6 per /64.
 */

describe("ClientAddresses", () => {
  it("counts the TCP peer and ignores X-Forwarded-For when no proxy is trusted (the default)", () => {
    const addresses = new ClientAddresses([]);
    expect(addresses.of("203.0.113.7", "198.51.100.1")).toBe("203.0.113.7");
    expect(addresses.of("::ffff:127.0.0.2", undefined)).toBe("127.0.0.2");
    expect(addresses.of(undefined, undefined)).toBe("unknown");
  });

  it("behind trusted proxies takes the rightmost hop they did not write, never one the client could forge", () => {
    const addresses = new ClientAddresses(["10.0.0.1", "10.0.0.2"]);
    // The client wrote 1.1.1.1 itself; the first proxy appended the real peer 203.0.113.7.
    expect(addresses.of("10.0.0.2", "1.1.1.1, 203.0.113.7, 10.0.0.1")).toBe("203.0.113.7");
    expect(addresses.of("10.0.0.1", ["1.1.1.1", "203.0.113.9"])).toBe("203.0.113.9");
    // Only trusted hops, or none: the nearest trusted one is all that is known.
    expect(addresses.of("10.0.0.1", "10.0.0.2")).toBe("10.0.0.2");
    expect(addresses.of("10.0.0.1", undefined)).toBe("10.0.0.1");
    // Something that is not an address stops the walk.
    expect(addresses.of("10.0.0.1", "203.0.113.7, not-an-ip")).toBe("10.0.0.1");
    // An untrusted peer's header is never read.
    expect(addresses.of("203.0.113.50", "10.0.0.1, 1.1.1.1")).toBe("203.0.113.50");
  });

  it("counts IPv6 per /64, however the address is spelled", () => {
    const addresses = new ClientAddresses([]);
    expect(addresses.of("2001:db8:1:2:aaaa::1", undefined)).toBe("2001:db8:1:2::/64");
    expect(addresses.of("2001:0db8:0001:0002:ffff:ffff:ffff:ffff", undefined)).toBe("2001:db8:1:2::/64");
    expect(addresses.of("2001:db8::1", undefined)).toBe("2001:db8:0:0::/64");
    expect(addresses.of("::1", undefined)).toBe("0:0:0:0::/64");
    expect(addresses.of("fe80::1%eth0", undefined)).toBe("fe80:0:0:0::/64");
    expect(addresses.of("64:ff9b::192.0.2.1", undefined)).toBe("64:ff9b:0:0::/64");
  });
});

describe("parseTrustedProxies", () => {
  it("reads comma-separated addresses and names the first entry that is not one", () => {
    expect(parseTrustedProxies(undefined)).toEqual([]);
    expect(parseTrustedProxies(" 10.0.0.1, ::1 ,")).toEqual(["10.0.0.1", "::1"]);
    expect(() => parseTrustedProxies("10.0.0.1, 10.0.0.0/8")).toThrow('TRUSTED_PROXIES must list IP addresses, got "10.0.0.0/8"');
  });
});
