// Access logs: one JSON line per request with what an operator needs to answer "what happened to
// request X"; the request id travels in x-request-id both ways; routine lane failures are
// warnings without stacks; ACCESS_LOG=false turns the lines off.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { storesLabel, type TestGateway } from "../helpers/gateway.ts";
import { startRelayWorld, type RelayWorld } from "../helpers/relay-world.ts";
import type { MockUpstream } from "../mocks/openai-upstream.ts";
import { addRoutingKey, chatBody, lane } from "../relay/fixtures.ts";

function accessLines(gw: TestGateway): Array<Record<string, any>> {
  return gw.logs.flatMap((chunk) => chunk.split("\n")).filter(Boolean).map((l) => JSON.parse(l)).filter((l) => l.log === "access");
}

/** The access line of one request; it is written when the request ends (a stream's last byte). */
async function lineFor(gw: TestGateway, requestId: string): Promise<Record<string, any>> {
  for (let i = 0; i < 100; i++) {
    const found = accessLines(gw).filter((l) => l.request_id === requestId);
    if (found.length) {
      expect(found.length).toBe(1);
      return found[0]!;
    }
    await Bun.sleep(10);
  }
  throw new Error(`no access line for ${requestId}`);
}

describe(`access log (${storesLabel})`, () => {
  let gw: TestGateway;
  let A: MockUpstream, B: MockUpstream;
  let key: { raw: string };

  let w: RelayWorld<"openai" | "groq">;
  beforeAll(async () => {
    w = await startRelayWorld({ providers: ["openai", "groq"] });
    ({ gw, up: { openai: A, groq: B } } = w);
    key = await addRoutingKey(gw, w.acct.id, { lanes: [lane("openai", w.cred.openai.id), lane("groq", w.cred.groq.id)] });
  }, 60_000);
  afterAll(() => w?.stop(), 60_000);

  test("a request that fell over: its line names both lanes, the one that served, the outcome, tokens and cost", async () => {
    A.setDefault({ status: 503 });
    B.setDefault({ content: "from B" });
    const r = await gw.call("/v1/chat/completions", { token: key.raw, body: chatBody() });
    expect(r.status).toBe(200);
    const id = r.headers.get("x-request-id")!;
    expect(id).toBeTruthy();
    const line = await lineFor(gw, id);
    expect(line).toMatchObject({
      level: 30, msg: "request", method: "POST", route: "/v1/chat/completions", status: 200,
      key_prefix: key.raw.slice(0, 10), model: "gpt-4o-mini", served_by: "groq", outcome: "ok",
    });
    expect(line.lanes).toEqual([
      { provider: "openai", lane: 0, status: 503, code: expect.any(String) },
      { provider: "groq", lane: 1, status: 200 },
    ]);
    expect(line.duration_ms).toBeGreaterThanOrEqual(0);
    expect(line.ttfb_ms).toBeGreaterThanOrEqual(0);
    expect(line.input_tokens).toBeGreaterThan(0);
    expect(line.output_tokens).toBeGreaterThan(0);
    expect(typeof line.cost_usd).toBe("number");
    // The lane that fell over is a warning without a stack, not an error.
    const lines = gw.logs.flatMap((c) => c.split("\n")).filter(Boolean).map((l) => JSON.parse(l));
    const warn = lines.find((l) => l.requestId === id && l.msg === "lane failed; trying the next lane");
    expect(warn).toMatchObject({ level: 40, provider: "openai", status: 503 });
    expect(JSON.stringify(lines.filter((l) => l.requestId === id || l.request_id === id))).not.toContain("stack");
    // No secret in the line: the key is a prefix only.
    expect(JSON.stringify(line)).not.toContain(key.raw);
  });

  test("a stream that fell over: written when the stream ends, with both lanes", async () => {
    A.setDefault({ status: 500 });
    B.setDefault({ content: "streamed by B", chunks: 3 });
    const res = await gw.req("/v1/chat/completions", { token: key.raw, body: chatBody({ stream: true }) });
    expect(res.status).toBe(200);
    await res.text();
    const line = await lineFor(gw, res.headers.get("x-request-id")!);
    expect(line.lanes.map((l: any) => [l.provider, l.status])).toEqual([["openai", 500], ["groq", 200]]);
    expect(line).toMatchObject({ served_by: "groq", outcome: "ok", status: 200 });
  });

  test("every lane failed: outcome error, no lane served, a warning (not an error with a stack)", async () => {
    A.setDefault({ status: 503 });
    B.setDefault({ status: 502 });
    const r = await gw.call("/v1/chat/completions", { token: key.raw, body: chatBody() });
    expect(r.status).toBeGreaterThanOrEqual(500);
    const id = r.headers.get("x-request-id")!;
    const line = await lineFor(gw, id);
    expect(line).toMatchObject({ outcome: "error", served_by: null, status: r.status });
    expect(line.lanes.map((l: any) => l.provider)).toEqual(["openai", "groq"]);
    const lines = gw.logs.flatMap((c) => c.split("\n")).filter(Boolean).map((l) => JSON.parse(l));
    const failed = lines.find((l) => l.requestId === id && l.msg === "request failed");
    expect(failed.level).toBe(40);
    expect(failed.err?.stack).toBeUndefined();
  });

  test("the client's x-request-id is kept when it is short and safe, replaced otherwise", async () => {
    A.setDefault({});
    const mine = "trace-42.abc:def_1";
    const r = await gw.call("/v1/organizations/me", { token: "sk_nope", headers: { "x-request-id": mine } });
    expect(r.headers.get("x-request-id")).toBe(mine);
    expect((await lineFor(gw, mine)).status).toBe(r.status);
    for (const bad of ["a".repeat(129), "has space", "semi;colon", "<script>"]) {
      const b = await gw.req("/healthz", { headers: { "x-request-id": bad } });
      expect(b.headers.get("x-request-id")).not.toBe(bad);
      expect(b.headers.get("x-request-id")).toMatch(/^[\w.:-]{1,128}$/);
    }
  });

  test("a 405 and a 404 carry a request id and get their line too", async () => {
    const wrong = await gw.req("/v1/chat/completions", { method: "GET" });
    expect(wrong.status).toBe(405);
    expect(await lineFor(gw, wrong.headers.get("x-request-id")!)).toMatchObject({ method: "GET", route: "/v1/chat/completions", status: 405 });
    const missing = await gw.req("/no/such/path");
    expect(missing.status).toBe(404);
    expect(await lineFor(gw, missing.headers.get("x-request-id")!)).toMatchObject({ method: "GET", route: "(no route)", status: 404 });
  });

  test("management and health requests get a line too (route is the path template)", async () => {
    const r = await gw.req("/healthz");
    const line = await lineFor(gw, r.headers.get("x-request-id")!);
    expect(line).toMatchObject({ method: "GET", route: "/healthz", status: 200 });
    expect(line.lanes).toBeUndefined();
  });
});
