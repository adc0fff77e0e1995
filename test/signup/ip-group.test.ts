// Per-IP limits count an IPv6 client by its /64 (README "Behaviour worth knowing"): one holder of
// a /64 has 2^64 addresses, so each address counted apart would be no limit at all.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { ipLimitGroup } from "../../src/http/ip-group.ts";
import { startTestGateway, storesLabel, type TestGateway } from "../helpers/gateway.ts";
import { randomEmail, signupCall } from "../helpers/signup.ts";

describe("ipLimitGroup", () => {
  test("IPv6 addresses group by /64, in any spelling; IPv4 (and IPv4-mapped IPv6) by address", () => {
    expect(ipLimitGroup("2001:db8:1:2::1")).toBe("2001:db8:1:2::/64");
    expect(ipLimitGroup("2001:0db8:0001:0002:ffff:ffff:ffff:ffff")).toBe("2001:db8:1:2::/64");
    expect(ipLimitGroup("2001:DB8:1:2:abcd::9")).toBe("2001:db8:1:2::/64");
    expect(ipLimitGroup("2001:db8:1:3::1")).toBe("2001:db8:1:3::/64");
    expect(ipLimitGroup("fe80::1%eth0")).toBe("fe80::/64");
    expect(ipLimitGroup("203.0.113.7")).toBe("203.0.113.7");
    expect(ipLimitGroup("::ffff:203.0.113.7")).toBe("203.0.113.7");
    expect(ipLimitGroup("not an address")).toBe("not an address");
  });
});

describe(`the signup per-IP limit over IPv6 (${storesLabel})`, () => {
  let gw: TestGateway;
  beforeAll(async () => {
    gw = await startTestGateway({ SIGNUP_IP_LIMIT_PER_HOUR: "2" });
  }, 60_000);
  afterAll(() => gw?.stop(), 60_000);

  test("three addresses of one /64 share one allowance; another /64 has its own", async () => {
    const net = `2001:db8:${Math.floor(Math.random() * 0xffff).toString(16)}:7`;
    expect((await signupCall(gw, "agent-signup", { email: randomEmail() }, `${net}::1`)).status).toBe(200);
    expect((await signupCall(gw, "agent-signup", { email: randomEmail() }, `${net}:aaaa::2`)).status).toBe(200);
    const third = await signupCall(gw, "agent-signup", { email: randomEmail() }, `${net}:ffff:ffff:ffff:fffe`);
    expect(third.status).toBe(429);
    expect((await signupCall(gw, "agent-signup", { email: randomEmail() }, `${net.replace(/:7$/, ":8")}::1`)).status).toBe(200);
  });
});
