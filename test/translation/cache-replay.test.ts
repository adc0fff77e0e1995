// The response cache's replays (CONTRACT §8 "Response cache", docs/caching.md "One entry for a
// stream and a JSON answer"): an answer stored from a stream serves a JSON request and the
// reverse, in every client protocol (chat, Responses, Messages), on a pass-through lane and a
// translated one, with tool calls. Every hit is checked against what the live answer carried
// (text, tool names and arguments, usage) and against the schemas live answers are checked with:
// OpenAI's published OpenAPI document for chat and Responses (as far as the live answer itself
// was valid), the official Anthropic SDK's stream reader for Messages. Below: every field of the
// answer reaches its hits, in each protocol (Gemini and embeddings included).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import Anthropic from "@anthropic-ai/sdk";
import { fixtureJson, fixtureLines } from "../fixtures/index.ts";
import { parseSse } from "../protocols/helpers.ts";
import { expectValid, expectValidEvent, liveErrors } from "./openai-schema.ts";
import { startWorld, type World } from "./world.ts";


type Shape = "chat" | "responses" | "anthropic";
type Lane = "openai" | "anthropic";
type CacheLane = Lane | "google";
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
const keys: Record<CacheLane, string> = {} as Record<CacheLane, string>;

beforeAll(async () => {
  w = await startWorld();
  for (const lane of ["openai", "anthropic", "google"] as CacheLane[]) {
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

// ---- A hit carries every field of the answer it replays (docs/caching.md "One entry for a
// stream and a JSON answer"): chat's logprobs, audio, annotations, system_fingerprint and
// service_tier; a Responses answer's service_tier, annotations and logprobs; a Messages answer's
// citations, stop_sequence and usage.service_tier; Gemini's logprobs, citations, safety ratings
// and model version; an embeddings answer whole. A hit in the mode of the live answer is the live
// answer (chunk by chunk, every member of every event) with fresh ids and created and usage.cost
// 0 (CONTRACT §9); a hit in the other mode carries the same fields, accumulated from the stream
// or spread over one. Each vendor mock sends its protocol's real answer shapes.

type Ev = { event: string | null; data: any };
const events = (text: string): Ev[] => parseSse(text).filter((e) => e.data).map((e) => ({ event: e.event ?? null, data: e.data === "[DONE]" ? e.data : JSON.parse(e.data) }));

/** The ids, times and cost a hit writes afresh (an audio clip's id is the vendor's reference and stays). */
const FRESH = new Set(["id", "item_id", "call_id", "responseId", "created", "created_at", "cost"]);
function strip(v: any, parent = ""): any {
  if (Array.isArray(v)) return v.map((x) => strip(x, parent));
  if (!v || typeof v !== "object") return v;
  const out: any = {};
  for (const k of Object.keys(v)) if (!(FRESH.has(k) && parent !== "audio")) out[k] = strip(v[k], k);
  return out;
}

/** Every `cost` in a usage block of the answer. */
function costs(v: any, parent = "", out: number[] = []): number[] {
  if (Array.isArray(v)) v.forEach((x) => costs(x, parent, out));
  else if (v && typeof v === "object") for (const k of Object.keys(v)) (k === "cost" && (parent === "usage" || parent === "usageMetadata") ? out.push(v[k]) : costs(v[k], k, out));
  return out;
}

const question = (() => {
  let n = 0;
  return () => `What is the capital of France? (${Date.now()}-${++n})`;
})();

interface Protocol {
  lane: CacheLane;
  path(stream: boolean): string;
  body(q: string): Record<string, unknown>;
  streamBody?: Record<string, unknown>;
  enqueue(): void;
  /** The named fields of a JSON answer, and the same of a stream (accumulated as a client reads it). */
  fields(json: any): unknown;
  streamFields(evs: Ev[]): unknown;
}

// ---- chat ----
const tok = (token: string) => ({ token, logprob: -0.0123, bytes: [...new TextEncoder().encode(token)], top_logprobs: [{ token, logprob: -0.0123, bytes: [...new TextEncoder().encode(token)] }] });
const TOKENS = ["Paris", " is", " the", " capital", "."];
const URL_CITATION = { type: "url_citation", url_citation: { start_index: 0, end_index: 5, title: "Paris - Wikipedia", url: "https://en.wikipedia.org/wiki/Paris" } };
const AUDIO = { id: "audio_6783cbd4a1f08190a3fbf6d0e8d3b2a1", expires_at: 1999999999, data: "UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQAAAAA=", transcript: "Paris is the capital." };
const CHAT_USAGE = { prompt_tokens: 14, completion_tokens: 5, total_tokens: 19, prompt_tokens_details: { cached_tokens: 0, audio_tokens: 0 }, completion_tokens_details: { reasoning_tokens: 0, audio_tokens: 0, accepted_prediction_tokens: 0, rejected_prediction_tokens: 0 } };
const chatHead = { id: "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT", created: 1741569952, model: "gpt-4o-audio-preview-2024-12-17", service_tier: "default", system_fingerprint: "fp_f9f4fb6dbf" };
const chatJson = {
  ...chatHead, object: "chat.completion",
  choices: [{ index: 0, message: { role: "assistant", content: TOKENS.join(""), refusal: null, annotations: [URL_CITATION], audio: AUDIO }, logprobs: { content: TOKENS.map(tok), refusal: null }, finish_reason: "stop" }],
  usage: CHAT_USAGE,
};
const chunk = (delta: any, extra: any = {}) => ({ ...chatHead, object: "chat.completion.chunk", choices: [{ index: 0, delta, logprobs: null, finish_reason: null, ...extra }], obfuscation: "k2Vv" });
const chatStream = [
  chunk({ role: "assistant", content: "", refusal: null }),
  ...TOKENS.map((t) => chunk({ content: t }, { logprobs: { content: [tok(t)], refusal: null } })),
  chunk({ annotations: [URL_CITATION] }),
  chunk({ audio: { id: AUDIO.id, transcript: "Paris is", expires_at: AUDIO.expires_at } }),
  chunk({ audio: { data: AUDIO.data.slice(0, 20) } }),
  chunk({ audio: { data: AUDIO.data.slice(20), transcript: " the capital." } }),
  chunk({}, { finish_reason: "stop" }),
  { ...chatHead, object: "chat.completion.chunk", choices: [], usage: CHAT_USAGE, obfuscation: "Qe" },
];
function chatStreamFields(evs: Ev[]) {
  const chunks = evs.map((e) => e.data).filter((d) => typeof d === "object" && d.choices?.length);
  const audio: any = {};
  for (const c of chunks) {
    const a = c.choices[0].delta.audio;
    if (!a) continue;
    for (const k of ["id", "expires_at"]) if (a[k] !== undefined) audio[k] = a[k];
    for (const k of ["data", "transcript"]) if (a[k] !== undefined) audio[k] = (audio[k] ?? "") + a[k];
  }
  return {
    system_fingerprint: [...new Set(chunks.map((c) => c.system_fingerprint))],
    service_tier: [...new Set(chunks.map((c) => c.service_tier))],
    content: chunks.map((c) => c.choices[0].delta.content ?? "").join(""),
    logprobs: chunks.flatMap((c) => c.choices[0].logprobs?.content ?? []),
    annotations: chunks.flatMap((c) => c.choices[0].delta.annotations ?? []),
    audio,
  };
}
const chat: Protocol = {
  lane: "openai",
  path: () => "/v1/chat/completions",
  body: (q) => ({ model: "gpt-4o-audio-preview", messages: [{ role: "user", content: q }], logprobs: true, top_logprobs: 1, modalities: ["text", "audio"], audio: { voice: "alloy", format: "wav" } }),
  streamBody: { stream_options: { include_usage: true } },
  enqueue: () => w.openai.enqueue({ json: chatJson, stream: chatStream }),
  fields: (j) => {
    const c = j.choices[0];
    return { system_fingerprint: [j.system_fingerprint], service_tier: [j.service_tier], content: c.message.content, logprobs: c.logprobs.content, annotations: c.message.annotations, audio: c.message.audio };
  },
  streamFields: chatStreamFields,
};

// ---- Responses ----
const ANNOTATION = { type: "url_citation", start_index: 0, end_index: 5, url: "https://en.wikipedia.org/wiki/Paris", title: "Paris - Wikipedia" };
const RLOGPROBS = TOKENS.map((t) => ({ token: t, logprob: -0.0123, bytes: [...new TextEncoder().encode(t)], top_logprobs: [] }));
const respId = "resp_67ccd2bed1ec8190b14f964abc0542670bb6a6b452d3795b";
const msgId = "msg_67ccd2bf17f0819081ff3bb2cf6508e60bb6a6b452d3795b";
const RUSAGE = { input_tokens: 14, input_tokens_details: { cached_tokens: 0 }, output_tokens: 5, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 19 };
const part = { type: "output_text", text: TOKENS.join(""), annotations: [ANNOTATION], logprobs: RLOGPROBS };
const item = { id: msgId, type: "message", status: "completed", role: "assistant", content: [part] };
const respBase = {
  id: respId, object: "response", created_at: 1741476542, status: "completed", background: false, error: null, incomplete_details: null, instructions: null, max_output_tokens: null, max_tool_calls: null,
  model: "gpt-4.1-2025-04-14", parallel_tool_calls: true, previous_response_id: null, prompt_cache_key: null, reasoning: { effort: null, summary: null }, safety_identifier: null, service_tier: "default", store: false,
  temperature: 1.0, text: { format: { type: "text" }, verbosity: "medium" }, tool_choice: "auto", tools: [], top_logprobs: 1, top_p: 1.0, truncation: "disabled", user: null, metadata: {},
};
const respJson = { ...respBase, output: [item], usage: RUSAGE };
const inProgress = { ...respBase, status: "in_progress", output: [], usage: null };
const respStream = [
  { type: "response.created", response: inProgress },
  { type: "response.in_progress", response: inProgress },
  { type: "response.output_item.added", output_index: 0, item: { ...item, status: "in_progress", content: [] } },
  { type: "response.content_part.added", item_id: msgId, output_index: 0, content_index: 0, part: { type: "output_text", text: "", annotations: [], logprobs: [] } },
  ...TOKENS.map((t, i) => ({ type: "response.output_text.delta", item_id: msgId, output_index: 0, content_index: 0, delta: t, logprobs: [RLOGPROBS[i]], obfuscation: "x9" })),
  { type: "response.output_text.annotation.added", item_id: msgId, output_index: 0, content_index: 0, annotation_index: 0, annotation: ANNOTATION },
  { type: "response.output_text.done", item_id: msgId, output_index: 0, content_index: 0, text: part.text, logprobs: RLOGPROBS },
  { type: "response.content_part.done", item_id: msgId, output_index: 0, content_index: 0, part },
  { type: "response.output_item.done", output_index: 0, item },
  { type: "response.completed", response: respJson },
].map((e, i) => ({ ...e, sequence_number: i }));
const respFields = (r: any) => ({ service_tier: r.service_tier, top_logprobs: r.top_logprobs, text: r.output[0].content[0].text, annotations: r.output[0].content[0].annotations, logprobs: r.output[0].content[0].logprobs });
const responses: Protocol = {
  lane: "openai",
  path: () => "/v1/responses",
  body: (q) => ({ model: "gpt-4.1", input: q, store: false, top_logprobs: 1, include: ["message.output_text.logprobs"] }),
  enqueue: () => w.openai.enqueue({ json: respJson, stream: respStream }),
  fields: respFields,
  streamFields: (evs) => {
    const completed = evs.find((e) => e.data?.type === "response.completed")!.data.response;
    const deltas = evs.filter((e) => e.data?.type === "response.output_text.delta");
    const done = evs.find((e) => e.data?.type === "response.output_item.done")!.data.item;
    const f = respFields(completed);
    // What a client reading the events sees: the deltas' text and logprobs, the finished item, the completed response.
    expect(deltas.map((e) => e.data.delta).join("")).toBe(f.text);
    expect(deltas.flatMap((e) => e.data.logprobs ?? [])).toEqual(f.logprobs);
    expect(strip(done.content)).toEqual(strip(completed.output[0].content));
    return f;
  },
};

// ---- Messages ----
const CITATION = { type: "web_search_result_location", cited_text: "Paris is the capital and largest city of France.", url: "https://en.wikipedia.org/wiki/Paris", title: "Paris - Wikipedia", encrypted_index: "Eo8BCioIAhgBIiQyYjQ0OWJmZi1lNm" };
const AUSAGE = { input_tokens: 14, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: 5, service_tier: "standard" };
const messageJson = {
  id: "msg_01XFDUDYJgAACzvnptvVoYEL", type: "message", role: "assistant", model: "claude-sonnet-4-5-20250929",
  content: [{ type: "text", text: TOKENS.join(""), citations: [CITATION] }], stop_reason: "stop_sequence", stop_sequence: "###", usage: AUSAGE,
};
const messageStream = [
  { type: "message_start", message: { ...messageJson, content: [], stop_reason: null, stop_sequence: null, usage: { ...AUSAGE, output_tokens: 1 } } },
  { type: "content_block_start", index: 0, content_block: { type: "text", text: "", citations: [] } },
  { type: "content_block_delta", index: 0, delta: { type: "citations_delta", citation: CITATION } },
  ...TOKENS.map((t) => ({ type: "content_block_delta", index: 0, delta: { type: "text_delta", text: t } })),
  { type: "content_block_stop", index: 0 },
  { type: "message_delta", delta: { stop_reason: "stop_sequence", stop_sequence: "###" }, usage: { output_tokens: 5 } },
  { type: "message_stop" },
];
const messages: Protocol = {
  lane: "anthropic",
  path: () => "/v1/messages",
  body: (q) => ({ model: "claude-sonnet-4-5-20250929", max_tokens: 256, stop_sequences: ["###"], messages: [{ role: "user", content: q }] }),
  enqueue: () => w.anthropic.enqueue({ json: messageJson, stream: messageStream }),
  fields: (m) => ({ text: m.content[0].text, citations: m.content[0].citations, stop_reason: m.stop_reason, stop_sequence: m.stop_sequence, service_tier: m.usage.service_tier }),
  streamFields: (evs) => {
    const d = evs.map((e) => e.data);
    const start = d.find((e) => e.type === "message_start").message;
    const end = d.find((e) => e.type === "message_delta");
    const deltas = d.filter((e) => e.type === "content_block_delta");
    return {
      text: deltas.filter((e) => e.delta.type === "text_delta").map((e) => e.delta.text).join(""),
      citations: deltas.filter((e) => e.delta.type === "citations_delta").map((e) => e.delta.citation),
      stop_reason: end.delta.stop_reason,
      stop_sequence: end.delta.stop_sequence,
      service_tier: start.usage.service_tier,
    };
  },
};

// ---- Gemini ----
const SAFETY = [{ category: "HARM_CATEGORY_HATE_SPEECH", probability: "NEGLIGIBLE" }, { category: "HARM_CATEGORY_DANGEROUS_CONTENT", probability: "NEGLIGIBLE" }];
const CHOSEN = TOKENS.map((t) => ({ token: t, logProbability: -0.0123 }));
const GUSAGE = { promptTokenCount: 14, candidatesTokenCount: 5, totalTokenCount: 19, promptTokensDetails: [{ modality: "TEXT", tokenCount: 14 }] };
const CITES = { citationSources: [{ startIndex: 0, endIndex: 5, uri: "https://en.wikipedia.org/wiki/Paris", license: "" }] };
const geminiJson = {
  candidates: [{ content: { parts: [{ text: TOKENS.join("") }], role: "model" }, finishReason: "STOP", avgLogprobs: -0.0123, logprobsResult: { topCandidates: CHOSEN.map((c) => ({ candidates: [c] })), chosenCandidates: CHOSEN }, citationMetadata: CITES, safetyRatings: SAFETY, index: 0 }],
  usageMetadata: GUSAGE, modelVersion: "gemini-2.5-flash", responseId: "7MdbaNv3Ooq8xN8PtdmJmAk",
};
const geminiStream = [
  { candidates: [{ content: { parts: [{ text: "Paris is" }], role: "model" }, index: 0, logprobsResult: { topCandidates: CHOSEN.slice(0, 2).map((c) => ({ candidates: [c] })), chosenCandidates: CHOSEN.slice(0, 2) } }], usageMetadata: { promptTokenCount: 14, totalTokenCount: 14, promptTokensDetails: GUSAGE.promptTokensDetails }, modelVersion: "gemini-2.5-flash", responseId: "7MdbaNv3Ooq8xN8PtdmJmAk" },
  { candidates: [{ content: { parts: [{ text: " the capital." }], role: "model" }, finishReason: "STOP", index: 0, avgLogprobs: -0.0123, logprobsResult: { topCandidates: CHOSEN.slice(2).map((c) => ({ candidates: [c] })), chosenCandidates: CHOSEN.slice(2) }, citationMetadata: CITES, safetyRatings: SAFETY }], usageMetadata: GUSAGE, modelVersion: "gemini-2.5-flash", responseId: "7MdbaNv3Ooq8xN8PtdmJmAk" },
];
const gemini: Protocol = {
  lane: "google",
  path: (stream) => `/v1beta/models/gemini-2.5-flash:${stream ? "streamGenerateContent?alt=sse" : "generateContent"}`,
  body: (q) => ({ contents: [{ role: "user", parts: [{ text: q }] }], generationConfig: { responseLogprobs: true, logprobs: 1 } }),
  enqueue: () => w.gemini.enqueue({ json: geminiJson, stream: geminiStream }),
  fields: (r) => {
    const c = r.candidates[0];
    return { text: c.content.parts.map((p: any) => p.text).join(""), avgLogprobs: c.avgLogprobs, chosen: c.logprobsResult.chosenCandidates, top: c.logprobsResult.topCandidates, citations: c.citationMetadata, safety: c.safetyRatings, modelVersion: r.modelVersion, usage: strip(r.usageMetadata) };
  },
  streamFields: (evs) => {
    const cs = evs.map((e) => e.data.candidates[0]);
    const last = evs.at(-1)!.data;
    return {
      text: cs.flatMap((c) => c.content.parts).map((p: any) => p.text).join(""),
      avgLogprobs: cs.at(-1).avgLogprobs,
      chosen: cs.flatMap((c) => c.logprobsResult?.chosenCandidates ?? []),
      top: cs.flatMap((c) => c.logprobsResult?.topCandidates ?? []),
      citations: cs.at(-1).citationMetadata,
      safety: cs.at(-1).safetyRatings,
      modelVersion: last.modelVersion,
      usage: strip(last.usageMetadata),
    };
  },
};

const PROTOCOLS: Record<string, Protocol> = { chat, responses, messages, gemini };

async function call(p: Protocol, body: Record<string, unknown>, stream: boolean) {
  const b = stream ? { ...body, ...(p === gemini ? {} : { stream: true, ...(p.streamBody ?? {}) }) } : body;
  const headers: Record<string, string> = p === gemini ? { "x-goog-api-key": keys[p.lane]! } : { authorization: `Bearer ${keys[p.lane]!}` };
  const res = await fetch(`${w.gw.url}${p.path(stream)}`, { method: "POST", headers: { "content-type": "application/json", "anthropic-version": "2023-06-01", ...headers }, body: JSON.stringify(b) });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`${p.path(stream)}: ${res.status} ${text}`);
  return { xcache: res.headers.get("x-cache"), text };
}

describe("CONTRACT §8: a cache hit carries every field of the answer it replays", () => {
  for (const [name, p] of Object.entries(PROTOCOLS)) {
    test(`CONTRACT §8: ${name}: a JSON answer's hits, JSON and streamed, carry its every field; usage.cost is 0`, async () => {
      const body = p.body(question());
      p.enqueue();
      const miss = await call(p, body, false);
      expect(miss.xcache).toBe("MISS");
      const live = JSON.parse(miss.text);
      const hit = await call(p, body, false);
      expect(hit.xcache).toBe("HIT");
      const j = JSON.parse(hit.text);
      // The whole answer, member for member, but for the ids, times and cost a hit writes afresh.
      expect(strip(j)).toEqual(strip(live));
      expect(p.fields(j)).toEqual(p.fields(live));
      expect(costs(j).every((c) => c === 0)).toBe(true);
      const sHit = await call(p, body, true);
      expect(sHit.xcache).toBe("HIT");
      const evs = events(sHit.text).filter((e) => e.data !== "[DONE]");
      expect(p.streamFields(evs)).toEqual(p.fields(live));
      expect(costs(evs.map((e) => e.data)).every((c) => c === 0)).toBe(true);
    });

    test(`CONTRACT §8: ${name}: a streamed answer's hits carry its every event and field, chunk by chunk when streamed; usage.cost is 0`, async () => {
      const body = p.body(question());
      p.enqueue();
      const miss = await call(p, body, true);
      expect(miss.xcache).toBe("MISS");
      const live = events(miss.text);
      const sHit = await call(p, body, true);
      expect(sHit.xcache).toBe("HIT");
      const evs = events(sHit.text);
      // Event for event, every member of each (per-chunk logprobs, fingerprints, annotations…).
      expect(evs.map((e) => ({ event: e.event, data: strip(e.data) }))).toEqual(live.map((e) => ({ event: e.event, data: strip(e.data) })));
      const dataOf = (x: Ev[]) => x.filter((e) => e.data !== "[DONE]");
      expect(p.streamFields(dataOf(evs))).toEqual(p.streamFields(dataOf(live)));
      expect(costs(evs.map((e) => e.data)).every((c) => c === 0)).toBe(true);
      const hit = await call(p, body, false);
      expect(hit.xcache).toBe("HIT");
      const j = JSON.parse(hit.text);
      expect(p.fields(j)).toEqual(p.streamFields(dataOf(live)));
      expect(costs(j).every((c) => c === 0)).toBe(true);
    });
  }

  test("CONTRACT §8: embeddings: a hit is the answer as it was, with usage.cost 0", async () => {
    const body = { model: "text-embedding-3-small", input: question() };
    const call1 = await w.gw.req("/v1/embeddings", { token: keys.openai!, body });
    expect(call1.headers.get("x-cache")).toBe("MISS");
    const live: any = await call1.json();
    const call2 = await w.gw.req("/v1/embeddings", { token: keys.openai!, body });
    expect(call2.headers.get("x-cache")).toBe("HIT");
    const j: any = await call2.json();
    expect(strip(j)).toEqual(strip(live));
    expect(costs(j).every((c) => c === 0)).toBe(true);
  });
});
