import type { LookupAddress } from "node:dns";
import { describe, expect, it } from "vitest";
import { checkedLookup, hostOf, refusalOf, refusalOfSavedUrl } from "./target.js";

/*
 * Where a webhook may go (decisions §8): link-local and metadata addresses never, production events
 * to public addresses only, sandbox events anywhere else (a receiver on the developer's laptop).
 */

const neverReachable = [
  "169.254.169.254",
  "169.254.0.1",
  "0.0.0.0",
  "0.1.2.3",
  "100.100.100.200",
  "::",
  "fe80::1",
  "febf:ffff::1",
  "fd00:ec2::254",
  // IPv4 addresses written as IPv6, dotted and as the URL parser writes them.
  "::ffff:169.254.169.254",
  "::ffff:a9fe:a9fe",
  "::FFFF:169.254.169.254",
  // The same behind the NAT64 prefix, which a NAT64 gateway turns back into the IPv4 address.
  "64:ff9b::a9fe:a9fe",
  "64:ff9b::169.254.169.254",
];

const privateButReachable = [
  "127.0.0.1",
  "127.255.0.9",
  "10.0.0.1",
  "172.16.0.1",
  "172.31.255.254",
  "192.168.1.1",
  "100.64.0.1",
  "198.18.0.1",
  "192.0.0.8",
  "224.0.0.1",
  "255.255.255.255",
  "::1",
  "fc00::1",
  "fd12:3456::1",
  "ff02::1",
  "64:ff9b::7f00:1",
  "100::1",
  "::ffff:127.0.0.1",
  "::ffff:7f00:1",
  "::ffff:10.0.0.1",
  "64:ff9b::a00:1",
  "2001:db8::1",
];

const publicAddresses = [
  "8.8.8.8",
  "1.1.1.1",
  "11.0.0.1",
  "172.32.0.1",
  "100.128.0.1",
  "193.0.0.1",
  "2606:4700:4700::1111",
  "2a00:1450::1",
  "64:ff9b::808:808",
];

describe("refusalOf", () => {
  it.each(neverReachable)("refuses %s for sandbox and production events alike, as link-local or metadata", (address) => {
    for (const livemode of [false, true]) {
      const refusal = refusalOf(address, livemode);
      expect(refusal, `livemode ${livemode}`).toContain(address);
      expect(refusal).toContain("link-local or metadata");
    }
  });

  it.each(privateButReachable)("lets sandbox events go to %s but not production ones", (address) => {
    expect(refusalOf(address, false)).toBeUndefined();
    const refusal = refusalOf(address, true);
    expect(refusal).toContain(address);
    expect(refusal).toContain("not a public address");
  });

  it.each(publicAddresses)("lets both go to the public address %s", (address) => {
    expect(refusalOf(address, false)).toBeUndefined();
    expect(refusalOf(address, true)).toBeUndefined();
  });
});

describe("hostOf", () => {
  it.each([
    ["https://hooks.example.com:8443/x", "hooks.example.com"],
    ["http://127.0.0.1/", "127.0.0.1"],
    ["http://[fe80::1]/", "fe80::1"],
    ["http://[::ffff:169.254.169.254]/", "::ffff:a9fe:a9fe"],
    // The URL parser reads every IPv4 spelling as the dotted address.
    ["http://2852039166/", "169.254.169.254"],
    ["http://0xa9.0xfe.0xa9.0xfe/", "169.254.169.254"],
  ])("%s → %s", (url, host) => {
    expect(hostOf(new URL(url))).toBe(host);
  });
});

/** What checkedLookup answers for `hostname`. */
function lookup(livemode: boolean, hostname: string, all: boolean): Promise<{ error: NodeJS.ErrnoException | null; result: unknown }> {
  return new Promise((resolve) => {
    checkedLookup(livemode)(hostname, { all }, (error: NodeJS.ErrnoException | null, address: string | LookupAddress[]) =>
      resolve({ error, result: address }),
    );
  });
}

describe("checkedLookup", () => {
  it("refuses a production connection to a name that resolves to a loopback address, before connecting", async () => {
    for (const all of [false, true]) {
      const { error } = await lookup(true, "localhost", all);
      expect(error?.code).toBe("EREFUSEDTARGET");
      expect(error?.message).toContain("not a public address");
    }
  });

  it("resolves the same name for a sandbox connection, one address or all of them", async () => {
    const one = await lookup(false, "localhost", false);
    expect(one.error).toBeNull();
    expect(["127.0.0.1", "::1"]).toContain(one.result);
    const all = await lookup(false, "localhost", true);
    expect(all.error).toBeNull();
    expect((all.result as LookupAddress[]).map((a) => a.address)).toContain(one.result);
  });

  it("passes on a name that does not resolve as the DNS error it is", async () => {
    const { error } = await lookup(false, "no-such-host.invalid", false);
    expect(["ENOTFOUND", "EAI_AGAIN"]).toContain(error?.code);
  });
});

describe("refusalOfSavedUrl", () => {
  it.each([
    "http://169.254.169.254/",
    "http://169.254.169.254/latest/meta-data/",
    "http://[fe80::1]/",
    "http://[::ffff:169.254.169.254]/",
    "http://2852039166/",
    "http://0/",
    "http://[::]/",
    "http://100.100.100.200/",
    "http://[fd00:ec2::254]/",
  ])("refuses %s: it reaches a link-local or metadata address", async (url) => {
    expect(await refusalOfSavedUrl(url)).toContain("link-local or metadata");
  });

  it.each([
    "http://localhost:1234/x",
    "http://127.0.0.1:8080/hook",
    "http://10.0.0.1/hook",
    "https://8.8.8.8/hook",
    // Not deployed yet: accepted, checked again at every delivery.
    "https://no-such-host.invalid/hook",
  ])("accepts %s: a profile serves the sandbox too", async (url) => {
    expect(await refusalOfSavedUrl(url)).toBeUndefined();
  });

  it("refuses a URL carrying a user name or password", async () => {
    expect(await refusalOfSavedUrl("https://user:secret@hooks.example.com/")).toContain("user name or password");
    expect(await refusalOfSavedUrl("https://user@hooks.example.com/")).toContain("user name or password");
  });
});
