// CONTRACT §8 Streams: "when the upstream sends nothing for KEEPALIVE_MS before its first byte, the
// gateway sends the response headers and a `:` comment, and keeps commenting until data flows; a
// later failure of every lane then ends that stream with an SSE error event." The mock upstreams
// hold their response headers back (latency_ms), so the silence is before the upstream's first byte.
import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import { eq } from "drizzle-orm";
import { storesLabel, type TestGateway } from "../helpers/gateway.ts";
import { type RelayWorld, startRelayWorld, usageRows } from "../helpers/relay-world.ts";
import type { MockUpstream } from "../mocks/openai-upstream.ts";
import { usageRecords } from "../../src/store/db/schema/index.ts";
import { addRoutingKey, chatBody, dataLines, lane } from "../relay/fixtures.ts";

let gw: TestGateway;
let A: MockUpstream, B: MockUpstream;
let key: { raw: string };
/** A fresh key with a budget per test: its month spend shows the reservation and the settlement alone. */
let budgetedKey: () => Promise<{ raw: string }>;

let w: RelayWorld<"openai" | "groq">;
beforeAll(async () => {
  w = await startRelayWorld({ providers: ["openai", "groq"], env: { KEEPALIVE_MS: "100" } });
  ({ gw, up: { openai: A, groq: B } } = w);
  const [a, b] = [w.cred.openai, w.cred.groq];
  key = await addRoutingKey(gw, w.acct.id, { lanes: [lane("openai", a.id), lane("groq", b.id)] });
  budgetedKey = () => addRoutingKey(gw, w.acct.id, { lanes: [lane("openai", a.id), lane("groq", b.id)], monthlyBudgetUsd: 50 });
}, 60_000);
afterEach(() => {
  A.setDefault({});
  B.setDefault({});
}, 60_000);
afterAll(() => w?.stop(), 60_000);

async function recordsOf(requestId: string) {
  return usageRows(gw, eq(usageRecords.requestId, requestId));
}

/** The key's month spend (reservations in flight included), polled until `ok` holds or 5 s pass. */
async function spendUntil(raw: string, ok: (usd: number) => boolean): Promise<number> {
  const end = Date.now() + 5000;
  for (;;) {
    const usd = (await gw.call("/v1/key", { token: raw })).body.budget.current_month_spend_usd as number;
    if (ok(usd) || Date.now() > end) return usd;
    await Bun.sleep(25);
  }
}

/** Reads an SSE body to its end, noting how many `:` comment lines came before the first data line. */
async function readSse(res: Response): Promise<{ text: string; commentsBeforeData: number }> {
  const reader = res.body!.getReader();
  const dec = new TextDecoder();
  let text = "";
  for (;;) {
    const r = await reader.read();
    if (r.done) break;
    text += dec.decode(r.value, { stream: true });
  }
  const lines = text.split(/\r\n|\n/);
  const firstData = lines.findIndex((l) => l.startsWith("data:") || l.startsWith("event:"));
  const before = firstData < 0 ? lines : lines.slice(0, firstData);
  return { text, commentsBeforeData: before.filter((l) => l.startsWith(":")).length };
}

const bodies = {
  chat: { path: "/v1/chat/completions", body: chatBody({ stream: true }) },
  responses: { path: "/v1/responses", body: { model: "gpt-4o-mini", input: "Say hello.", stream: true } },
  messages: { path: "/v1/messages", body: { model: "gpt-4o-mini", max_tokens: 64, messages: [{ role: "user", content: "Say hello." }], stream: true } },
};

describe(`CONTRACT §8: keep-alive before the upstream's first byte (${storesLabel})`, () => {
  test("a silent upstream: headers and `:` comments go out at once and keep coming, then the data flows and ends normally", async () => {
    A.setDefault({ latency_ms: 700, chunks: 3 });
    const budgeted = await budgetedKey();
    const res = await gw.req("/v1/chat/completions", { token: budgeted.raw, body: chatBody({ stream: true, stream_options: { include_usage: true } }) });
    // The handler answered before the upstream did: the headers a stream carries are all there.
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toStartWith("text/event-stream");
    expect(res.headers.get("cache-control")).toBe("no-cache");
    expect(res.headers.get("x-accel-buffering")).toBe("no");
    const requestId = res.headers.get("x-request-id")!;
    expect(requestId).toBeTruthy();
    const { text, commentsBeforeData } = await readSse(res);
    expect(commentsBeforeData).toBeGreaterThanOrEqual(2);
    const data = dataLines(text);
    expect(data.at(-1)).toBe("[DONE]");
    const chunks = data.slice(0, -1).map((d) => JSON.parse(d));
    expect(chunks.map((c) => c.choices[0]?.delta?.content ?? "").join("")).not.toBe("");
    expect(text).not.toContain("event: error");
    const rows = await recordsOf(requestId);
    expect(rows.map((r) => [r.provider, r.outcome])).toEqual([["openai", "ok"]]);
    expect(rows[0]!.costUsd).toBeGreaterThan(0);
    // Settled once, to the real cost.
    const spent = await spendUntil(budgeted.raw, (usd) => Math.abs(usd - rows[0]!.costUsd) < 1e-6);
    expect(spent).toBeCloseTo(rows[0]!.costUsd, 6);
  });

  test("a lane that fails after the comments started falls over inside the same response", async () => {
    A.setDefault({ latency_ms: 300, status: 503 });
    B.setDefault({ latency_ms: 300, chunks: 2 });
    const res = await gw.req("/v1/chat/completions", { token: key.raw, body: chatBody({ stream: true }) });
    expect(res.status).toBe(200);
    const { text, commentsBeforeData } = await readSse(res);
    expect(commentsBeforeData).toBeGreaterThanOrEqual(2);
    expect(dataLines(text).at(-1)).toBe("[DONE]");
    const rows = await recordsOf(res.headers.get("x-request-id")!);
    expect(rows.map((r) => [r.provider, r.outcome]).sort()).toEqual([["groq", "ok"], ["openai", "error"]]);
  });

  for (const [shape, req] of Object.entries(bodies)) {
    test(`every lane failing after the comments started ends the stream with the ${shape} client's SSE error event`, async () => {
      A.setDefault({ latency_ms: 300, status: 500 });
      B.setDefault({ latency_ms: 300, status: 502 });
      const budgeted = await budgetedKey();
      const res = await gw.req(req.path, { token: budgeted.raw, body: req.body });
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toStartWith("text/event-stream");
      // The reservation is held while the lanes are tried…
      expect(await spendUntil(budgeted.raw, (usd) => usd > 0)).toBeGreaterThan(0);
      const { text, commentsBeforeData } = await readSse(res);
      expect(commentsBeforeData).toBeGreaterThanOrEqual(2);
      const events = text.split(/\r?\n\r?\n/).filter((e) => e.trim() && !e.startsWith(":"));
      expect(events.length).toBe(1);
      const ev = events[0]!;
      const payload = JSON.parse(dataLines(ev)[0]!);
      if (shape === "chat") {
        expect(ev).toStartWith("event: error\n");
        expect(payload.error).toMatchObject({ type: "server_error", param: null, code: "upstream_error" });
        expect(payload.error.message).toContain("Every provider lane failed (2 tried)");
      } else if (shape === "responses") {
        expect(ev).toStartWith("event: error\n");
        expect(payload).toMatchObject({ type: "error", code: "upstream_error", param: null });
        expect(payload.message).toContain("Every provider lane failed");
      } else {
        expect(ev).toStartWith("event: error\n");
        expect(payload.type).toBe("error");
        expect(payload.error.type).toBe("api_error");
        expect(payload.error.message).toContain("Every provider lane failed");
      }
      expect(text).not.toContain("[DONE]");
      // …and settled once: a failed request costs nothing, each attempt has its record.
      const rows = await recordsOf(res.headers.get("x-request-id")!);
      expect(rows.map((r) => [r.provider, r.outcome]).sort()).toEqual([["groq", "error"], ["openai", "error"]]);
      expect(await spendUntil(budgeted.raw, (usd) => usd === 0)).toBe(0);
    });
  }

  for (const [shape, req] of Object.entries(bodies)) {
    test(`a request refused after the comments started ends the ${shape} stream with the refusal's own error type and param, not a server error`, async () => {
      A.setDefault({ latency_ms: 700, status: 400, error: { message: "Invalid value for 'temperature'.", type: "invalid_request_error", param: "temperature", code: "invalid_value" } });
      const res = await gw.req(req.path, { token: key.raw, body: req.body });
      expect(res.status).toBe(200);
      const { text, commentsBeforeData } = await readSse(res);
      expect(commentsBeforeData).toBeGreaterThanOrEqual(2);
      const events = text.split(/\r?\n\r?\n/).filter((e) => e.trim() && !e.startsWith(":"));
      expect(events.length).toBe(1);
      const payload = JSON.parse(dataLines(events[0]!)[0]!);
      if (shape === "chat") expect(payload.error).toMatchObject({ type: "invalid_request_error", param: "temperature", code: "invalid_value" });
      else if (shape === "responses") expect(payload).toMatchObject({ type: "error", code: "invalid_value", param: "temperature" });
      else expect(payload.error.type).toBe("invalid_request_error");
      // The same refusal as a JSON answer, for comparison: same type, param and code.
      const direct = await gw.call("/v1/chat/completions", { token: key.raw, body: chatBody() });
      expect(direct.status).toBe(400);
      expect(direct.body.error).toMatchObject({ type: "invalid_request_error", param: "temperature", code: "invalid_value" });
    });
  }

  test("a client that leaves during the keep-alive phase aborts the upstream attempt, and the request settles", async () => {
    A.setDefault({ latency_ms: 5000 });
    const budgeted = await budgetedKey();
    const a0 = A.aborted;
    const b0 = B.received.length;
    const ac = new AbortController();
    const res = await fetch(`${gw.url}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${budgeted.raw}`, "content-type": "application/json" },
      body: JSON.stringify(chatBody({ stream: true })),
      signal: ac.signal,
    });
    expect(res.status).toBe(200);
    const requestId = res.headers.get("x-request-id")!;
    const first = await res.body!.getReader().read();
    expect(new TextDecoder().decode(first.value)).toStartWith(":");
    expect(await spendUntil(budgeted.raw, (usd) => usd > 0)).toBeGreaterThan(0);
    const reserved = await spendUntil(budgeted.raw, () => true);
    ac.abort();
    await A.waitForAborts(a0 + 1, 3000);
    let rows = await recordsOf(requestId);
    for (let i = 0; rows.length === 0 && i < 40; i++) {
      await Bun.sleep(25);
      rows = await recordsOf(requestId);
    }
    expect(rows.map((r) => r.outcome)).toEqual(["aborted"]);
    // The upstream had the request: it pays its prompt (CONTRACT §7), and the rest of the reservation goes back.
    const paid = rows[0]!.costUsd;
    expect(paid).toBeGreaterThan(0);
    expect(await spendUntil(budgeted.raw, (usd) => Math.abs(usd - paid) < 1e-6)).toBeCloseTo(paid, 6);
    expect(paid).toBeLessThan(reserved);
    expect(B.received.length).toBe(b0);
  });

  test("an upstream that answers within KEEPALIVE_MS gets no comment: the stream is the upstream's bytes", async () => {
    A.setDefault({ chunks: 3 });
    const res = await gw.req("/v1/chat/completions", { token: key.raw, body: chatBody({ stream: true }) });
    const text = await res.text();
    expect(text.split(/\r?\n/).filter((l) => l.startsWith(":"))).toEqual([]);
    expect(dataLines(text).at(-1)).toBe("[DONE]");
  });
});
