// The committed client stream (relay/stream/relay-stream.ts streamResponse) with an upstream
// whose bytes arrive split awkwardly: CRLF across chunks, a UTF-8 character across chunks, one
// event over 1-byte chunks, several events in one chunk, no blank line after the last event.
// The client gets the upstream's bytes unchanged and the usage the upstream reported is recorded
// (the pass-through tap finds events and usage whatever the split). Gateway → loopback upstream.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { eq } from "drizzle-orm";
import { createAccount, startTestGateway, storesLabel, type TestGateway } from "../helpers/gateway.ts";
import { usageRows } from "../helpers/relay-world.ts";
import { serveLoopback, type LoopbackServer } from "../mocks/scaffold.ts";
import { usageRecords } from "../../src/store/db/schema/index.ts";
import { addCredential, addRoutingKey, chatBody, expectPassThroughStream, lane } from "./fixtures.ts";

const enc = new TextEncoder();
const chunk = (delta: object, finish: string | null = null) =>
  JSON.stringify({ id: "chatcmpl-split", object: "chat.completion.chunk", created: 1700000000, model: "gpt-4o-mini", choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }] });
const USAGE = { prompt_tokens: 17, completion_tokens: 5, total_tokens: 22 };
const events = [
  chunk({ role: "assistant", content: "" }),
  chunk({ content: "héllo ✓ 😀" }),
  chunk({}, "stop"),
  JSON.stringify({ id: "chatcmpl-split", object: "chat.completion.chunk", created: 1700000000, model: "gpt-4o-mini", choices: [], usage: USAGE }),
  "[DONE]",
];
const lf = events.map((e) => `data: ${e}\n\n`).join("");
const crlf = events.map((e) => `data: ${e}\r\n\r\n`).join("");

/** Byte plans: the upstream body as the chunks it is written in. */
function splitAt(bytes: Uint8Array, cuts: number[]): Uint8Array[] {
  const out: Uint8Array[] = [];
  let at = 0;
  for (const c of [...cuts, bytes.length]) { out.push(bytes.slice(at, c)); at = c; }
  return out.filter((b) => b.length > 0);
}
/**
 * The awkward splits of one SSE body, written once with `\n` and once with `\r\n` line ends: every
 * cut between a \r and its \n; cuts inside the two- and four-byte characters; 1-byte chunks; all
 * in one chunk; the last event's line ended but no blank line after it.
 */
function plansFor(lf: string, crlf: string): Record<string, Uint8Array[]> {
  const lfBytes = enc.encode(lf);
  return {
    crlf: splitAt(enc.encode(crlf), [...crlf.matchAll(/\r\n/g)].map((m) => enc.encode(crlf.slice(0, m.index! + 1)).length)),
    utf8: splitAt(lfBytes, [enc.encode(lf.slice(0, lf.indexOf("é"))).length + 1, enc.encode(lf.slice(0, lf.indexOf("😀"))).length + 2]),
    bytes1: splitAt(lfBytes, Array.from({ length: lfBytes.length - 1 }, (_, i) => i + 1)),
    one: [lfBytes],
    noTrailingBlank: [enc.encode(lf.slice(0, -1))],
  };
}
const PLANS = plansFor(lf, crlf);

describe(`client stream over awkward upstream splits (${storesLabel})`, () => {
  let gw: TestGateway;
  let upstream: LoopbackServer;
  let key: { raw: string };

  beforeAll(async () => {
    upstream = serveLoopback({
      async fetch(req) {
        const body = (await req.json()) as { mock?: { plan?: string } };
        const parts = PLANS[body.mock?.plan ?? ""];
        if (!parts) return new Response("unknown plan", { status: 400 });
        let i = 0;
        const stream = new ReadableStream<Uint8Array>({
          async pull(c) {
            if (i >= parts.length) return c.close();
            c.enqueue(parts[i++]!);
            // Separate writes: a yield between chunks keeps them apart on the wire.
            await Bun.sleep(0);
          },
        });
        return new Response(stream, { headers: { "content-type": "text/event-stream" } });
      },
    });
    gw = await startTestGateway({ PROVIDER_OPENAI_BASE_URL: `${upstream.origin}/v1` });
    const acct = await createAccount(gw);
    const a = await addCredential(gw, acct.id, "openai");
    key = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", a.id)] });
  }, 60_000);
  afterAll(async () => {
    await gw?.stop();
    await upstream?.stop();
  }, 60_000);

  for (const [plan, parts] of Object.entries(PLANS)) {
    test(`${plan}: the client gets the upstream's bytes unchanged (the usage chunk with the gateway's cost, CONTRACT §9) and its usage is recorded`, async () => {
      const body = chatBody({ stream: true, stream_options: { include_usage: true }, mock: { plan } });
      const res = await gw.req("/v1/chat/completions", { token: key.raw, body });
      expect(res.status).toBe(200);
      const got = new Uint8Array(await res.arrayBuffer());
      const sent = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
      let at = 0;
      for (const p of parts) { sent.set(p, at); at += p.length; }
      const cost = expectPassThroughStream(new TextDecoder().decode(got), new TextDecoder().decode(sent));
      const rows = await usageRows(gw, eq(usageRecords.requestId, res.headers.get("x-request-id")!));
      expect(rows.length).toBe(1);
      expect(cost).toBe(rows[0]!.costUsd);
      expect(rows[0]).toMatchObject({ outcome: "ok", status: 200, promptTokens: 17, completionTokens: 5 });
    });
  }
});

// The same splits on a translated stream: an Anthropic upstream, a chat client (TranslateTap).
const A_EVENTS = [
  { type: "message_start", message: { id: "msg_split", type: "message", role: "assistant", model: "claude-3-5-haiku-latest", content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: 17, output_tokens: 1 } } },
  { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } },
  { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "héllo ✓ 😀" } },
  { type: "content_block_stop", index: 0 },
  { type: "message_delta", delta: { stop_reason: "end_turn", stop_sequence: null }, usage: { output_tokens: 5 } },
  { type: "message_stop" },
];
const aText = (eol: string) => A_EVENTS.map((e) => `event: ${e.type}${eol}data: ${JSON.stringify(e)}${eol}${eol}`).join("");
const A_PLANS = plansFor(aText("\n"), aText("\r\n"));

describe(`translated client stream over awkward upstream splits (${storesLabel})`, () => {
  let gw: TestGateway;
  let upstream: LoopbackServer;
  let key: { raw: string };

  beforeAll(async () => {
    upstream = serveLoopback({
      async fetch(req) {
        const body = (await req.json()) as { metadata?: { user_id?: string } };
        const parts = A_PLANS[body.metadata?.user_id ?? ""];
        if (!parts) return new Response("unknown plan", { status: 400 });
        let i = 0;
        return new Response(new ReadableStream<Uint8Array>({
          async pull(c) {
            if (i >= parts.length) return c.close();
            c.enqueue(parts[i++]!);
            await Bun.sleep(0);
          },
        }), { headers: { "content-type": "text/event-stream" } });
      },
    });
    gw = await startTestGateway({ PROVIDER_ANTHROPIC_BASE_URL: upstream.origin });
    const acct = await createAccount(gw);
    const a = await addCredential(gw, acct.id, "anthropic");
    key = await addRoutingKey(gw, acct.id, { lanes: [lane("anthropic", a.id, { model: "claude-3-5-haiku-latest" })] });
  }, 60_000);
  afterAll(async () => {
    await gw?.stop();
    await upstream?.stop();
  }, 60_000);

  for (const plan of Object.keys(A_PLANS)) {
    test(`${plan}: the chat client gets the whole text, a normal end and the upstream's usage`, async () => {
      const body = chatBody({ stream: true, stream_options: { include_usage: true }, user: plan });
      const res = await gw.req("/v1/chat/completions", { token: key.raw, body });
      expect(res.status).toBe(200);
      const data = (await res.text()).split("\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6));
      expect(data.at(-1)).toBe("[DONE]");
      const chunks = data.slice(0, -1).map((d) => JSON.parse(d));
      expect(chunks.map((c) => c.choices[0]?.delta?.content ?? "").join("")).toBe("héllo ✓ 😀");
      expect(chunks.find((c) => c.choices[0]?.finish_reason)?.choices[0].finish_reason).toBe("stop");
      expect(chunks.at(-1).usage).toMatchObject({ prompt_tokens: 17, completion_tokens: 5 });
      const rows = await usageRows(gw, eq(usageRecords.requestId, res.headers.get("x-request-id")!));
      expect(rows[0]).toMatchObject({ outcome: "ok", status: 200, promptTokens: 17, completionTokens: 5 });
    });
  }
});
