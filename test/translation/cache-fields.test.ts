// A cache hit carries every field the answer it replays had (docs/caching.md "What a hit
// carries"): chat's logprobs, audio, annotations, system_fingerprint and service_tier; a
// Responses answer's service_tier, annotations and logprobs; a Messages answer's citations,
// stop_sequence and usage.service_tier; Gemini's logprobs, citations, safety ratings and model
// version; an embeddings answer whole. A hit in the mode of the live answer is the live answer
// (chunk by chunk, every member of every event) with fresh ids and created and usage.cost 0
// (CONTRACT §9); a hit in the other mode carries the same fields, accumulated from the stream or
// spread over one. Each vendor mock sends its protocol's real answer shapes.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { parseSse } from "../protocols/helpers.ts";
import { startWorld, type World } from "./world.ts";

let w: World;
const raw: Record<string, string> = {};

beforeAll(async () => {
  w = await startWorld();
  for (const lane of ["openai", "anthropic", "google"]) {
    const k = w.keys[lane]!;
    const r = await w.gw.call(`/v1/organizations/routing-keys?id=${k.keyId}`, { method: "PATCH", token: w.accountToken, body: { cache: { ttl_seconds: 600 } } });
    expect(r.status).toBe(200);
    raw[lane] = k.rawKey;
  }
}, 120_000);
afterAll(async () => {
  await w?.stop();
}, 60_000);

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
  lane: string;
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
  const headers: Record<string, string> = p === gemini ? { "x-goog-api-key": raw[p.lane]! } : { authorization: `Bearer ${raw[p.lane]!}` };
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
    const call1 = await w.gw.req("/v1/embeddings", { token: raw.openai!, body });
    expect(call1.headers.get("x-cache")).toBe("MISS");
    const live: any = await call1.json();
    const call2 = await w.gw.req("/v1/embeddings", { token: raw.openai!, body });
    expect(call2.headers.get("x-cache")).toBe("HIT");
    const j: any = await call2.json();
    expect(strip(j)).toEqual(strip(live));
    expect(costs(j).every((c) => c === 0)).toBe(true);
  });
});
