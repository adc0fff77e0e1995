// Nothing an upstream or a tenant sends becomes a metric label: an upstream inventing a new error
// code on every answer adds no series (its code is `other`, its status stays), and log lines keep
// the gateway's error codes readable while tokens stay redacted.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Writable } from "node:stream";
import { createLogger } from "../../src/logger.ts";
import { ENDPOINTS, ERROR_CODES, errorCodeLabel, OUTCOMES, providerLabel, statusLabel } from "../../src/metrics/label-sets.ts";
import { storesLabel, type TestGateway } from "../helpers/gateway.ts";
import { startRelayWorld, type RelayWorld } from "../helpers/relay-world.ts";
import type { MockUpstream } from "../mocks/openai-upstream.ts";
import { addRoutingKey, chatBody, lane } from "../relay/fixtures.ts";
import { sample } from "./scrape.ts";

describe("label sets", () => {
  test("error codes: the gateway's own and http_<status> are kept, anything else is `other`", () => {
    for (const c of ERROR_CODES) expect(errorCodeLabel(c)).toBe(c);
    expect(errorCodeLabel("http_503")).toBe("http_503");
    expect(errorCodeLabel("http_999")).toBe("other");
    expect(errorCodeLabel("made_up_1234")).toBe("other");
    expect(errorCodeLabel("")).toBe("other");
    expect(statusLabel(0)).toBe("0");
    expect(statusLabel(503)).toBe("503");
    expect(statusLabel(777)).toBe("other");
    expect(providerLabel("openai")).toBe("openai");
    expect(providerLabel("none")).toBe("none");
    expect(providerLabel("evil\"}provider")).toBe("other");
    expect(ENDPOINTS.size).toBeLessThan(20);
    expect(OUTCOMES.size).toBe(6); // ok, error, broken, aborted, refused, cache_hit (docs/caching.md)
  });
});

describe(`upstream-controlled error codes on /metrics (${storesLabel})`, () => {
  let gw: TestGateway;
  let up: MockUpstream;
  let rawKey: string;

  let w: RelayWorld<"openai">;
  beforeAll(async () => {
    w = await startRelayWorld({ providers: ["openai"] });
    ({ gw, up: { openai: up } } = w);
    rawKey = (await addRoutingKey(gw, w.acct.id, { lanes: [lane("openai", w.cred.openai.id), lane("openai", w.cred.openai.id)] })).raw;
  }, 60_000);
  afterAll(() => w?.stop(), 60_000);

  test("an upstream answering 500 with a new error.code each time adds no series: the code is `other`, counts still add up", async () => {
    const before = (await (await gw.req("/metrics")).text()).split("\n").length;
    const N = 25;
    for (let i = 0; i < N; i++) {
      const code = `invented_code_${i}_${crypto.randomUUID()}`;
      const r = await gw.req("/v1/chat/completions", { token: rawKey, body: chatBody({ mock: { status: 500, error: { message: "boom", type: "server_error", code } } }) });
      expect(r.status).toBe(502);
      await r.text();
    }
    const text = await (await gw.req("/metrics")).text();
    expect(text).not.toContain("invented_code_");
    // Two lanes per request, both failing.
    expect(sample(text, "gateway_upstream_errors_total", { provider: "openai", status: "500", code: "other" })).toBe(2 * N);
    expect(sample(text, "gateway_fallbacks_total", { endpoint: "chat", from_provider: "openai", reason: "other" })).toBe(N);
    // A handful of new series at most (the ones above and the request's own), not one per code.
    expect(text.split("\n").length - before).toBeLessThan(120);
  });

  test("the lane-failure warning line carries the error code readable, as the access line does", async () => {
    gw.logs.length = 0;
    const r = await gw.req("/v1/chat/completions", { token: rawKey, body: chatBody({ mock: { status: 429 } }) });
    expect(r.status).toBe(502);
    await r.text();
    const lines = gw.logs.join("");
    expect(lines).not.toContain('"code":"[redacted]"');
    const warn = gw.logs.find((l) => l.includes("lane failed"));
    expect(warn).toContain('"code":"rate_limit_exceeded"');
  });
});

describe("log redaction", () => {
  test("a `code` field is an error code and stays; tokens, keys and signup codes are redacted", () => {
    const out: string[] = [];
    const log = createLogger("info", new Writable({ write(c, _e, cb) { out.push(String(c)); cb(); } }) as any);
    log.warn({ code: "invalid_api_key", token: "sk_secret_token_value", api_key: "sk-live-abc", verification_code: "123456", nested: { code_plain: "654321" } }, "x");
    const line = out.join("");
    expect(line).toContain('"code":"invalid_api_key"');
    for (const s of ["sk_secret_token_value", "sk-live-abc", "123456", "654321"]) expect(line).not.toContain(s);
  });
});
