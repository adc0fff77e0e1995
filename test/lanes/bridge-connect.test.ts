// The bridge call's connect-time guard: the host is resolved and checked again right before the
// call, the call is pinned to the checked address, and a redirect is a lane failure.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { bridgeFetch, pinnedTarget } from "../../src/providers/bridge/connect.ts";
import { startTestGateway, storesLabel, type TestGateway } from "../helpers/gateway.ts";
import { startMockBridge, type MockBridge } from "../mocks/bridge.ts";

describe("pinning a bridge call to the checked address", () => {
  test("https: the URL names the checked address, Host and TLS server name keep the bridge's name", () => {
    expect(pinnedTarget("https://bridge.example.com:8443/v1/chat/completions", "93.184.216.34")).toEqual({
      url: "https://93.184.216.34:8443/v1/chat/completions",
      host: "bridge.example.com:8443",
      serverName: "bridge.example.com",
    });
  });
  test("http and IPv6: the address is bracketed, no TLS server name", () => {
    expect(pinnedTarget("http://bridge.example.com/v1/chat/completions", "2606:2800:220:1::1")).toEqual({
      url: "http://[2606:2800:220:1::1]/v1/chat/completions",
      host: "bridge.example.com",
      serverName: undefined,
    });
  });
  test("a base_url that is already an address is used as is", () => {
    expect(pinnedTarget("http://93.184.216.34:9000/v1/chat/completions", "93.184.216.34")).toEqual({ url: "http://93.184.216.34:9000/v1/chat/completions" });
  });
});

describe(`bridge connect-time checks (${storesLabel})`, () => {
  let strict: TestGateway;
  /** The same gateway's context with private upstreams allowed. */
  let open: Pick<TestGateway, "ctx">;
  let bridge: MockBridge;
  let target: MockBridge;
  beforeAll(async () => {
    strict = await startTestGateway({ ALLOW_PRIVATE_UPSTREAMS: "false" });
    open = { ctx: { ...strict.ctx, config: { ...strict.ctx.config, ALLOW_PRIVATE_UPSTREAMS: true } } };
    bridge = await startMockBridge();
    target = await startMockBridge();
  }, 60_000);
  afterAll(async () => {
    await strict.stop();
    await bridge.stop();
    await target.stop();
  }, 60_000);

  const send = (gw: Pick<TestGateway, "ctx">, base: string) => bridgeFetch(gw.ctx, `${base}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${bridge.token}`, "content-type": "application/json" },
    body: JSON.stringify({ model: "m", messages: [{ role: "user", content: "hi" }] }),
  });

  test("ALLOW_PRIVATE_UPSTREAMS=false: a bridge host resolving to loopback is refused at call time and never contacted", async () => {
    const port = new URL(bridge.url).port;
    for (const base of [`http://localhost:${port}`, bridge.url]) {
      const before = bridge.received.length;
      let err: any = null;
      try { await send(strict, base); } catch (e) { err = e; }
      expect(err?.name).toBe("GatewayError");
      expect(err.retryable).toBe(true);
      expect(err.message).toContain("loopback");
      expect(bridge.received.length).toBe(before);
    }
  });

  test("ALLOW_PRIVATE_UPSTREAMS=true: the same bridge is called", async () => {
    const res = await send(open, bridge.url);
    expect(res.status).toBe(200);
    expect(bridge.completions.at(-1)!.headers.authorization).toBe(`Bearer ${bridge.token}`);
  });

  test("a redirect from the bridge is a lane failure and is not followed", async () => {
    bridge.setRedirect(`${target.url}/v1/chat/completions`);
    try {
      let err: any = null;
      try { await send(open, bridge.url); } catch (e) { err = e; }
      expect(err?.name).toBe("GatewayError");
      expect(err.retryable).toBe(true);
      expect(err.message).toContain("redirect (302)");
      expect(target.received.length).toBe(0);
    } finally {
      bridge.setRedirect(null);
    }
  });
});
