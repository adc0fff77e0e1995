// SSRF guard (CONTRACT §2): with ALLOW_PRIVATE_UPSTREAMS=false a bridge base_url that resolves to a
// loopback, private, link-local, CGNAT, unique-local, metadata or unspecified address is refused
// at registration with 400 bad_request. Only literal addresses and `localhost` are used: the
// guard refuses them before any connection, so no traffic leaves the machine.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createAccount, startTestGateway, storesLabel, type TestGateway } from "../helpers/gateway.ts";
import { isPublicAddress, resolveAndCheck } from "../../src/net/ssrf.ts";
import type { Ctx } from "../../src/context.ts";

let gw: TestGateway;
let A: { id: string; token: string };

beforeAll(async () => {
  gw = await startTestGateway({ ALLOW_PRIVATE_UPSTREAMS: "false" });
  A = await createAccount(gw);
}, 60_000);
afterAll(async () => { await gw?.stop(); }, 60_000);

const REFUSED: Array<[string, string]> = [
  ["loopback", "http://127.0.0.1:8080"],
  ["loopback (whole 127/8)", "http://127.1.2.3"],
  ["loopback v6", "http://[::1]:3000"],
  ["localhost by name", "http://localhost:3000"],
  ["private 10/8", "https://10.1.2.3"],
  ["private 172.16/12", "https://172.16.5.4"],
  ["private 192.168/16", "https://192.168.0.10"],
  ["metadata 169.254.169.254", "http://169.254.169.254/latest"],
  ["link-local", "http://169.254.1.1"],
  ["link-local v6", "http://[fe80::1]"],
  ["CGNAT 100.64/10", "http://100.64.0.1"],
  ["unique-local fc00::/7", "http://[fc00::1]"],
  ["metadata fd00:ec2::254", "http://[fd00:ec2::254]"],
  ["unspecified 0.0.0.0", "http://0.0.0.0:8080"],
  ["unspecified ::", "http://[::]:8080"],
  ["IPv4-mapped loopback", "http://[::ffff:127.0.0.1]"],
  ["IPv4-mapped private", "http://[::ffff:10.0.0.1]"],
  ["loopback written as a decimal number", "http://2130706433"],
  ["loopback written in hex", "http://0x7f.1"],
  // CONTRACT §2 / SSRF: the IPv6 forms that reach IPv4 or are special-purpose.
  ["IPv4-compatible loopback [::127.0.0.1] (::/96)", "http://[::127.0.0.1]:8080"],
  ["IPv4-compatible [::7f00:1] (::/96)", "http://[::7f00:1]"],
  ["IPv4-compatible public [::8.8.8.8] (all of ::/96)", "http://[::8.8.8.8]"],
  ["NAT64 of a private IPv4 [64:ff9b::10.0.0.1]", "http://[64:ff9b::10.0.0.1]"],
  ["NAT64 of loopback [64:ff9b::7f00:1]", "http://[64:ff9b::7f00:1]"],
  ["local-use NAT64 64:ff9b:1::/48", "http://[64:ff9b:1::a00:1]"],
  ["6to4 2002::/16", "http://[2002:7f00:1::1]"],
  ["Teredo 2001::/32", "http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]"],
  ["site-local fec0::/10", "http://[fec0::1]"],
  ["unique-local fd00::/8", "http://[fd12:3456::1]"],
  ["multicast ff00::/8", "http://[ff02::1]"],
  ["documentation 2001:db8::/32", "http://[2001:db8::1]"],
  ["discard-only 100::/64", "http://[100::1]"],
  ["IPv4-translated ::ffff:0:0:0/96", "http://[::ffff:0:7f00:1]"],
];

describe(`SSRF guard at bridge registration (${storesLabel})`, () => {
  for (const [what, url] of REFUSED) {
    test(`ALLOW_PRIVATE_UPSTREAMS=false refuses a base_url on ${what} with 400 bad_request naming base_url`, async () => {
      const r = await gw.call("/v1/organizations/bridges", { method: "POST", token: A.token, body: { base_url: url, token: "abcdefgh12" } });
      expect(r.status).toBe(400);
      expect(r.body.code).toBe("bad_request");
      expect(r.body.error).toContain("`base_url`");
    });
  }

  test("a refused bridge is not stored", async () => {
    const r = await gw.call("/v1/organizations/bridges", { token: A.token });
    expect(r.body.bridges).toEqual([]);
  });

  test("resolveAndCheck returns the addresses of a public host and refuses private ones (no connection is made)", async () => {
    expect(await resolveAndCheck(gw.ctx, new URL("https://8.8.8.8/v1"))).toEqual(["8.8.8.8"]);
    expect(await resolveAndCheck(gw.ctx, new URL("https://[2606:4700:4700::1111]/"))).toEqual(["2606:4700:4700::1111"]);
    const refused = await resolveAndCheck(gw.ctx, new URL("http://localhost:1")).then(() => null, (e) => e);
    expect(refused?.status).toBe(400);
    expect(refused?.code).toBe("bad_request");
  });

  test("with ALLOW_PRIVATE_UPSTREAMS=true nothing is refused and no DNS query is made", async () => {
    const open: Ctx = { ...gw.ctx, config: { ...gw.ctx.config, ALLOW_PRIVATE_UPSTREAMS: true } };
    expect(await resolveAndCheck(open, new URL("http://127.0.0.1:9"))).toEqual(["127.0.0.1"]);
    expect(await resolveAndCheck(open, new URL("http://bridge.internal:9"))).toEqual([]);
  });

  test("isPublicAddress: only public unicast passes; NAT64 (64:ff9b::/96) is judged by the IPv4 it carries; ::/96 never passes", () => {
    for (const a of ["8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "64:ff9b::8.8.8.8"]) expect(isPublicAddress(a)).toBe(true);
    for (const a of ["::7f00:1", "::8.8.8.8", "::a00:1", "64:ff9b::a00:1", "64:ff9b::c0a8:101", "2002:808:808::1", "2001::1", "fec0::1", "ff05::2"]) expect(isPublicAddress(a)).toBe(false);
    for (const a of ["127.0.0.1", "10.0.0.1", "172.31.255.255", "192.168.1.1", "169.254.169.254", "100.100.100.200", "0.0.0.0", "::", "::1", "fe80::1", "fd00:ec2::254", "::ffff:192.168.1.1", "224.0.0.1", "255.255.255.255", "not-an-ip"]) {
      expect(isPublicAddress(a)).toBe(false);
    }
  });
});
