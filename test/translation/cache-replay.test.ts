// The response cache's replays (CONTRACT §8 "Response cache", docs/caching.md "One entry for a
// stream and a JSON answer"): an answer stored from a stream serves a JSON request and the
// reverse, in every client protocol (chat, Responses, Messages), on a pass-through lane and a
// translated one, with tool calls. Every hit is checked against what the live answer carried
// (text, tool names and arguments, usage) and against the schemas live answers are checked with:
// OpenAI's published OpenAPI document for chat and Responses, the official Anthropic SDK's stream
// reader for Messages.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import Anthropic from "@anthropic-ai/sdk";
import { fixtureJson, fixtureLines } from "../fixtures/index.ts";
import { parseSse } from "../protocols/helpers.ts";
import { expectValid, expectValidEvent, liveErrors } from "./openai-schema.ts";
import { startWorld, type World } from "./world.ts";


type Shape = "chat" | "responses" | "anthropic";
type Lane = "openai" | "anthropic";
const PATH: Record<Shape, string> = { chat: "/v1/chat/completions", responses: "/v1/responses", anthropic: "/v1/messages" };
const MODEL: Record<Lane, string> = { openai: "gpt-4.1", anthropic: "claude-sonnet-4-5-20250929" };
const TOOL = { name: "get_weather", description: "Weather of a place", parameters: { type: "object", properties: { location: { type: "string" } }, required: ["location"] } };
const TOOLS: Record<Shape, unknown[]> = {
  chat: [{ type: "function", function: TOOL }],
  responses: [{ type: "function", ...TOOL, strict: false }],
  anthropic: [{ name: TOOL.name, description: TOOL.description, input_schema: TOOL.parameters }],
};

/** What an answer says, in any protocol: its text and its tool calls (name, parsed arguments). */
interface Said {
  text: string;
  calls: { name: string; args: unknown; id: string }[];
  outputTokens: number | null;
}

const lines = (text: string) => parseSse(text).filter((e) => e.data && e.data !== "[DONE]").map((e) => JSON.parse(e.data));

function saidJson(shape: Shape, j: any): Said {
  if (shape === "chat") {
    const m = j.choices[0].message;
    return { text: m.content ?? "", calls: (m.tool_calls ?? []).map((t: any) => ({ name: t.function.name, args: JSON.parse(t.function.arguments), id: t.id })), outputTokens: j.usage?.completion_tokens ?? null };
  }
  if (shape === "responses") {
    const text = j.output.filter((o: any) => o.type === "message").flatMap((o: any) => o.content).map((c: any) => c.text ?? "").join("");
    const calls = j.output.filter((o: any) => o.type === "function_call").map((o: any) => ({ name: o.name, args: JSON.parse(o.arguments), id: o.call_id }));
    return { text, calls, outputTokens: j.usage?.output_tokens ?? null };
  }
  const text = j.content.filter((b: any) => b.type === "text").map((b: any) => b.text).join("");
  const calls = j.content.filter((b: any) => b.type === "tool_use").map((b: any) => ({ name: b.name, args: b.input, id: b.id }));
  return { text, calls, outputTokens: j.usage?.output_tokens ?? null };
}

function saidStream(shape: Shape, body: string): Said {
  const evs = lines(body);
  if (shape === "responses") {
    const done = evs.at(-1);
    expect(done.type).toBe("response.completed");
    return saidJson("responses", done.response);
  }
  if (shape === "anthropic") throw new Error("Messages streams are read by the SDK");
  let text = "";
  const calls: { name: string; args: string; id: string }[] = [];
  let outputTokens: number | null = null;
  for (const c of evs) {
    if (c.usage) outputTokens = c.usage.completion_tokens;
    const d = c.choices[0]?.delta;
    if (!d) continue;
    if (d.content) text += d.content;
    for (const t of d.tool_calls ?? []) {
      const call = (calls[t.index] ??= { name: "", args: "", id: "" });
      if (t.id) call.id = t.id;
      if (t.function?.name) call.name = t.function.name;
      if (t.function?.arguments) call.args += t.function.arguments;
    }
  }
  return { text, calls: calls.map((c) => ({ ...c, args: JSON.parse(c.args) })), outputTokens };
}

let w: World;
const keys: Record<Lane, string> = {} as Record<Lane, string>;

beforeAll(async () => {
  w = await startWorld();
  for (const lane of ["openai", "anthropic"] as Lane[]) {
    const k = w.keys[lane]!;
    const r = await w.gw.call(`/v1/organizations/routing-keys?id=${k.keyId}`, { method: "PATCH", token: w.accountToken, body: { cache: { ttl_seconds: 600 } } });
    expect(r.status).toBe(200);
    keys[lane] = k.rawKey;
  }
}, 120_000);
afterAll(async () => {
  await w?.stop();
}, 60_000);

/** Queues the lane's recorded tool-call answer for one request of this shape. */
function queueToolAnswer(lane: Lane, shape: Shape) {
  if (lane === "anthropic") {
    w.anthropic.enqueue({ json: "tool-use.response.json", stream: "tool-use.stream.jsonl" });
    return;
  }
  // The openai lane passes chat and Responses through and serves Messages clients in chat.
  const p = shape === "responses" ? "responses" : "chat";
  const name = shape === "responses" ? "function-call" : "tool-call";
  w.openai.enqueue({ json: fixtureJson(p, `${name}.response.json`), stream: fixtureLines(p, `${name}.stream.jsonl`).map((l) => JSON.parse(l)) });
}

let seq = 0;
function request(shape: Shape, lane: Lane) {
  const content = `What is the weather in Paris and Tokyo? (${Date.now()}-${++seq})`;
  // store: false: an answer the vendor stores can be referred back to, so it is never cached.
  if (shape === "responses") return { model: MODEL[lane], input: content, tools: TOOLS.responses, store: false };
  if (shape === "anthropic") return { model: MODEL[lane], max_tokens: 1024, messages: [{ role: "user", content }], tools: TOOLS.anthropic };
  return { model: MODEL[lane], messages: [{ role: "user", content }], tools: TOOLS.chat };
}

async function send(lane: Lane, shape: Shape, body: Record<string, unknown>, stream: boolean) {
  const extra = stream ? (shape === "chat" ? { stream: true, stream_options: { include_usage: true } } : { stream: true }) : {};
  const res = await w.gw.req(PATH[shape], { token: keys[lane], body: { ...body, ...extra } });
  return { status: res.status, xcache: res.headers.get("x-cache"), age: res.headers.get("age"), text: await res.text() };
}

/** A hit in the client's protocol: valid against the live answers' schema, and what it says. */
async function checkedHit(lane: Lane, shape: Shape, body: Record<string, unknown>, stream: boolean, where: string, tolerated: ReadonlySet<string> = new Set()): Promise<Said> {
  if (shape === "anthropic") {
    const client = new Anthropic({ apiKey: keys[lane], baseURL: w.gw.url, maxRetries: 0 });
    if (stream) {
      const s = client.messages.stream(body as any);
      const raw: any[] = [];
      s.on("streamEvent", (e) => raw.push(e));
      const m = await s.finalMessage();
      const { response } = await s.withResponse().catch(() => ({ response: null as Response | null }));
      if (response) expect(response.headers.get("x-cache")).toBe("HIT");
      expect(raw[0].type).toBe("message_start");
      expect(raw.at(-1).type).toBe("message_stop");
      expect(raw.some((e) => e.type === "content_block_delta")).toBe(true);
      return saidJson("anthropic", m);
    }
    const { data, response } = await client.messages.create(body as any).withResponse();
    expect(response.headers.get("x-cache")).toBe("HIT");
    expect(data.type).toBe("message");
    return saidJson("anthropic", data);
  }
  const r = await send(lane, shape, body, stream);
  expect(r.status).toBe(200);
  expect(r.xcache).toBe("HIT");
  expect(Number(r.age)).toBeGreaterThanOrEqual(0);
  if (!stream) {
    const j = JSON.parse(r.text);
    expectValid(shape === "chat" ? "CreateChatCompletionResponse" : "Response", j, where, tolerated);
    return saidJson(shape, j);
  }
  const evs = lines(r.text);
  expect(evs.length).toBeGreaterThan(3); // chunk by chunk, never one blob
  if (shape === "chat") evs.forEach((c, i) => expectValid("CreateChatCompletionStreamResponse", c, `${where} chunk ${i}`, tolerated));
  else {
    evs.forEach((e, i) => {
      expectValidEvent(e, `${where} event ${i}`, tolerated);
    });
    expect(evs.map((e) => e.sequence_number)).toEqual(evs.map((_, i) => i));
  }
  return saidStream(shape, r.text);
}

function sameAnswer(hit: Said, live: Said) {
  expect(hit.text).toBe(live.text);
  expect(hit.calls.map((c) => [c.name, c.args])).toEqual(live.calls.map((c) => [c.name, c.args]));
  expect(hit.calls.length).toBeGreaterThan(0);
  for (const [i, c] of hit.calls.entries()) expect(c.id).not.toBe(live.calls[i]!.id); // fresh ids per hit
  if (live.outputTokens !== null) expect(hit.outputTokens).toBe(live.outputTokens);
}

describe("CONTRACT §8: cached answers replay in the client's protocol, stream ↔ JSON", () => {
  for (const lane of ["openai", "anthropic"] as Lane[]) {
    for (const shape of ["chat", "responses", "anthropic"] as Shape[]) {
      if (lane === "anthropic" && shape === "responses") continue; // covered on the openai lane (pass-through) and by chat (translated)
      for (const first of ["stream", "json"] as const) {
        test(`CONTRACT §8: ${shape} client on the ${lane} lane: a ${first} answer stored, replayed as JSON and as a stream`, async () => {
          const body = request(shape, lane);
          queueToolAnswer(lane, shape);
          const live = await send(lane, shape, body, first === "stream");
          expect(live.status).toBe(200);
          expect(live.xcache).toBe("MISS");
          const said = first === "stream" && shape === "anthropic" ? null : first === "stream" ? saidStream(shape, live.text) : saidJson(shape, JSON.parse(live.text));
          // A hit replays the live answer with every field it had: held to the schema as far as the live answer was.
          const tolerated = shape === "anthropic" ? new Set<string>() : liveErrors(shape, first === "stream" ? { events: lines(live.text) } : { json: JSON.parse(live.text) });
          const asJson = await checkedHit(lane, shape, body, false, `${lane}/${shape} JSON hit`, tolerated);
          const asStream = await checkedHit(lane, shape, body, true, `${lane}/${shape} stream hit`, tolerated);
          sameAnswer(asJson, said ?? asStream);
          sameAnswer(asStream, said ?? asJson);
        });
      }
    }
  }
});

test("CONTRACT §8: embeddings are cached as they were answered (JSON only)", async () => {
  const body = { model: "text-embedding-3-small", input: `embed me ${Date.now()}-${++seq}` };
  const r1 = await w.gw.req("/v1/embeddings", { token: keys.openai, body });
  expect(r1.status).toBe(200);
  expect(r1.headers.get("x-cache")).toBe("MISS");
  const j1 = await r1.json();
  const r2 = await w.gw.req("/v1/embeddings", { token: keys.openai, body });
  expect(r2.headers.get("x-cache")).toBe("HIT");
  expect(await r2.json()).toEqual(j1);
  expect(w.openai.received.filter((r) => r.body?.input === body.input).length).toBe(1);
});

test("CONTRACT §8: an embeddings 200 whose body is an error is an error to the client and never cached", async () => {
  const body = { model: "text-embedding-3-small", input: `embed an error ${Date.now()}-${++seq}` };
  const failure = { error: { message: "The server had an error while processing your request.", type: "server_error", param: null, code: null } };
  w.openai.enqueueEmbeddings({ json: failure }, { json: failure });
  for (let i = 0; i < 2; i++) {
    const r = await w.gw.req("/v1/embeddings", { token: keys.openai, body });
    expect(r.status).toBeGreaterThanOrEqual(500);
    expect(r.headers.get("x-cache")).toBe("MISS");
    const j: any = await r.json();
    expect(j.error.message).toContain("The server had an error");
    expect(j.data).toBeUndefined();
  }
  expect(w.openai.received.filter((r) => r.body?.input === body.input).length).toBe(2);
  // The next good answer is the one kept.
  const good = await w.gw.req("/v1/embeddings", { token: keys.openai, body });
  expect(good.status).toBe(200);
  await good.text();
  expect((await w.gw.req("/v1/embeddings", { token: keys.openai, body })).headers.get("x-cache")).toBe("HIT");
});

test("CONTRACT §8: a chat lane's 200 error body reaches a Messages client as an Anthropic error, not an empty end_turn, and is never cached", async () => {
  const body = { model: MODEL.openai, max_tokens: 256, messages: [{ role: "user", content: `an error in a 200 ${Date.now()}-${++seq}` }] };
  const failure = { error: { message: "The server had an error while processing your request.", type: "server_error", param: null, code: null } };
  w.openai.enqueue({ json: failure }, { json: failure });
  for (let i = 0; i < 2; i++) {
    const r = await w.gw.req("/v1/messages", { token: keys.openai, body });
    expect(r.status).toBeGreaterThanOrEqual(500);
    expect(r.headers.get("x-cache")).toBe("MISS");
    const j: any = await r.json();
    expect(j.type).toBe("error");
    expect(j.error.message).toContain("The server had an error");
    expect(j.content).toBeUndefined();
  }
  expect(w.openai.received.filter((r) => JSON.stringify(r.body?.messages ?? "").includes(body.messages[0]!.content)).length).toBe(2);
});

test("CONTRACT §8: a Responses answer the vendor stores (store not false) is never cached: its resp_ id stays referable", async () => {
  for (const store of [undefined, true]) {
    const body = { model: MODEL.openai, input: `stored ${Date.now()}-${++seq}`, ...(store === undefined ? {} : { store }) };
    const ids: string[] = [];
    for (let i = 0; i < 2; i++) {
      const r = await w.gw.req("/v1/responses", { token: keys.openai, body });
      expect(r.status).toBe(200);
      expect(r.headers.get("x-cache")).toBe("BYPASS");
      ids.push(((await r.json()) as any).id);
    }
    expect(w.openai.received.filter((r) => r.body?.input === body.input).length).toBe(2);
  }
  const kept = { model: MODEL.openai, input: `not stored ${Date.now()}-${++seq}`, store: false };
  await (await w.gw.req("/v1/responses", { token: keys.openai, body: kept })).text();
  expect((await w.gw.req("/v1/responses", { token: keys.openai, body: kept })).headers.get("x-cache")).toBe("HIT");
});
