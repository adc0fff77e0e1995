// Streaming (CONTRACT §3): same-protocol bytes pass through untouched while a tap reads usage;
// SSE headers; keep-alive comments; no fallback after the first byte; client disconnects abort
// the upstream. Gateway → mock OpenAI upstream over real HTTP.
import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import { eq } from "drizzle-orm";
import { storesLabel, type TestGateway } from "../helpers/gateway.ts";
import { type RelayWorld, startRelayWorld, usageRows } from "../helpers/relay-world.ts";
import type { MockUpstream } from "../mocks/openai-upstream.ts";
import { usageRecords } from "../../src/store/db/schema/index.ts";
import { addRoutingKey, chatBody, dataLines, expectPassThroughStream, lane } from "./fixtures.ts";

describe(`streaming (${storesLabel})`, () => {
  let gw: TestGateway;
  let A: MockUpstream, B: MockUpstream;
  let key: { raw: string };
  let soloKey: { raw: string };

  let w: RelayWorld<"openai" | "groq">;
  beforeAll(async () => {
    w = await startRelayWorld({ providers: ["openai", "groq"], env: { KEEPALIVE_MS: "100", UPSTREAM_TIMEOUT_SECONDS: "1" } });
    ({ gw, up: { openai: A, groq: B } } = w);
    const [a, b] = [w.cred.openai, w.cred.groq];
    key = await addRoutingKey(gw, w.acct.id, { lanes: [lane("openai", a.id), lane("groq", b.id)] });
    soloKey = await addRoutingKey(gw, w.acct.id, { lanes: [lane("openai", a.id)] });
  }, 60_000);
  afterEach(() => {
    A.setDefault({});
    B.setDefault({});
  }, 60_000);
  afterAll(() => w?.stop(), 60_000);

  const direct = (body: unknown) =>
    fetch(`${A.url}/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });

  async function usageRowsFor(requestId: string) {
    return usageRows(gw, eq(usageRecords.requestId, requestId));
  }

  test("stream pass-through: the client receives the upstream's bytes unchanged (odd spacing, field order, CRLF) but for the usage chunk's cost (CONTRACT §9)", async () => {
    const mock = { odd_format: true, chunks: 20, id: "chatcmpl-fixed", created: 1700000000, content: "Zero-copy: ünïcødé ✓ and \"quotes\" with \\usage\\ inside" };
    const body = chatBody({ stream: true, stream_options: { include_usage: true }, mock });
    const expected = await (await direct(body)).text();
    expect(expected).toContain("data:{"); // really odd: no space after data:
    expect(expected).toContain("\r\n\r\n");
    const res = await gw.req("/v1/chat/completions", { token: soloKey.raw, body });
    expect(res.status).toBe(200);
    // This gateway sends a keep-alive comment when the upstream is silent for 100 ms (a loaded
    // machine can take that long to the first event): comments before the first event are the
    // gateway's own, every byte after them is the upstream's.
    const cost = expectPassThroughStream((await res.text()).replace(/^(: keep-alive\n\n)+/, ""), expected);
    const [row] = await usageRowsFor(res.headers.get("x-request-id")!);
    expect(cost).toBe(row!.costUsd);
  });

  test("stream usage: include_usage is requested upstream and its extra chunk is hidden from a client that did not ask", async () => {
    const mock = { odd_format: true, chunks: 4, id: "chatcmpl-fixed2", created: 1700000001 };
    const withUsage = await (await direct(chatBody({ stream: true, stream_options: { include_usage: true }, mock }))).text();
    const res = await gw.req("/v1/chat/completions", { token: soloKey.raw, body: chatBody({ stream: true, mock }) });
    const got = await res.text();
    expect(A.received.at(-1)!.body.stream_options).toEqual({ include_usage: true });
    // Exactly the upstream's bytes minus the one usage event.
    const events = withUsage.split("\r\n\r\n").filter(Boolean);
    const usageEvent = events.find((e) => e.includes('"usage" :{'))!;
    expect(usageEvent).toBeDefined();
    expect(got).toBe(withUsage.replace(usageEvent + "\r\n\r\n", ""));
    expect(got).not.toContain("prompt_tokens");
    expect(dataLines(got).at(-1)).toBe("[DONE]");
  });

  test("stream usage: the tap reads usage off the stream and records it", async () => {
    const res = await gw.req("/v1/chat/completions", { token: soloKey.raw, body: chatBody({ stream: true, mock: { prompt_tokens: 321, completion_tokens: 45, cached_tokens: 300 } }) });
    await res.text();
    const rows = await usageRowsFor(res.headers.get("x-request-id")!);
    expect(rows.length).toBe(1);
    expect(rows[0]).toMatchObject({ outcome: "ok", status: 200, promptTokens: 321, completionTokens: 45, cachedTokens: 300, provider: "openai" });
    expect(rows[0]!.costUsd).toBeGreaterThan(0);
    expect(rows[0]!.ttfbMs).not.toBeNull();
  });

  test("SSE headers: text/event-stream, no-cache, X-Accel-Buffering no, never compressed", async () => {
    const res = await gw.req("/v1/chat/completions", { token: soloKey.raw, body: chatBody({ stream: true }), headers: { "accept-encoding": "gzip, br" } });
    expect(res.headers.get("content-type")).toStartWith("text/event-stream");
    expect(res.headers.get("cache-control")).toBe("no-cache");
    expect(res.headers.get("x-accel-buffering")).toBe("no");
    expect(res.headers.get("content-encoding")).toBeNull();
    await res.text();
  });

  test("keep-alive: `:` comments go out while the upstream is quiet, between whole events", async () => {
    const res = await gw.req("/v1/chat/completions", { token: soloKey.raw, body: chatBody({ stream: true, mock: { chunks: 3, chunk_delay_ms: 450 } }) });
    const text = await res.text();
    const comments = text.split("\n").filter((l) => l.startsWith(":"));
    expect(comments.length).toBeGreaterThanOrEqual(3);
    // Comments never split an event: every data line still parses.
    for (const d of dataLines(text)) if (d !== "[DONE]") expect(() => JSON.parse(d)).not.toThrow();
    expect(dataLines(text).at(-1)).toBe("[DONE]");
  });

  test("a stream that breaks after its first byte ends with an SSE error event, no [DONE], no fallback, and its usage so far is recorded", async () => {
    const b0 = B.received.length;
    const res = await gw.req("/v1/chat/completions", { token: key.raw, body: chatBody({ stream: true, mock: { chunks: 6, break_after: 3, chunk_delay_ms: 20 } }) });
    expect(res.status).toBe(200);
    const text = await res.text();
    const data = dataLines(text);
    expect(data).not.toContain("[DONE]");
    expect(data.filter((d) => JSON.parse(d).choices).length).toBe(3);
    const last = JSON.parse(data.at(-1)!);
    expect(last.error.code).toBe("upstream_error");
    expect(text).toContain("event: error");
    expect(B.received.length).toBe(b0);
    const rows = await usageRowsFor(res.headers.get("x-request-id")!);
    expect(rows.length).toBe(1);
    expect(rows[0]!.outcome).toBe("broken");
    expect(rows[0]!.completionTokens).toBeGreaterThan(0);
    expect(rows[0]!.costUsd).toBeGreaterThan(0);
  });

  test("a stream whose upstream goes silent past UPSTREAM_TIMEOUT_SECONDS ends with an error event", async () => {
    const a0 = A.aborted;
    const res = await gw.req("/v1/chat/completions", { token: soloKey.raw, body: chatBody({ stream: true, mock: { chunks: 3, chunk_delay_ms: 3000 } }) });
    const text = await res.text();
    expect(text).toContain("event: error");
    expect(dataLines(text)).not.toContain("[DONE]");
    await A.waitForAborts(a0 + 1);
  });

  test("a client that disconnects mid-stream aborts the upstream request at once", async () => {
    const a0 = A.aborted;
    const ac = new AbortController();
    const res = await fetch(gw.url + "/v1/chat/completions", {
      method: "POST",
      headers: { authorization: `Bearer ${soloKey.raw}`, "content-type": "application/json" },
      body: JSON.stringify(chatBody({ stream: true, mock: { chunks: 200, chunk_delay_ms: 50 } })),
      signal: ac.signal,
    });
    const requestId = res.headers.get("x-request-id")!;
    const reader = res.body!.getReader();
    await reader.read();
    ac.abort();
    await A.waitForAborts(a0 + 1, 2000);
    await Bun.sleep(50);
    const rows = await usageRowsFor(requestId);
    expect(rows.map((r) => r.outcome)).toEqual(["aborted"]);
  });

  test("a client that disconnects while waiting for a plain answer aborts the upstream request at once", async () => {
    const a0 = A.aborted;
    const ac = new AbortController();
    const p = fetch(gw.url + "/v1/chat/completions", {
      method: "POST",
      headers: { authorization: `Bearer ${soloKey.raw}`, "content-type": "application/json" },
      body: JSON.stringify(chatBody({ mock: { latency_ms: 5000 } })),
      signal: ac.signal,
    }).catch(() => null);
    await Bun.sleep(150);
    ac.abort();
    await p;
    await A.waitForAborts(a0 + 1, 2000);
  });
});
