// A cached answer as the client was sent it (docs/caching.md "What a hit carries"), and how a hit
// is written from it. The pivot keeps only what every protocol shares (text, reasoning, tool
// calls, usage); an answer carries more: chat's `logprobs`, `audio`, `annotations`,
// `system_fingerprint`, `service_tier`, a Responses answer's echoed settings and annotations, a
// Messages answer's citations and `stop_sequence`, Gemini's safety ratings and grounding. So the
// entry keeps the client's own answer, parsed: the JSON body, or the stream's events in order.
// A hit in the same mode writes it back as it was, every event with every field; a hit in the
// other mode is built from it within the protocol (a stream accumulated into its JSON answer,
// a JSON answer written as the events a stream of it carries), never through the pivot.
//
// Written once per entry, protocol, mode and delivery fields (replay-template.ts keeps the bytes),
// so nothing here is on the per-hit path. What a hit writes afresh: the answer's ids (completion,
// response, message, item and tool-call ids; each old id one new one, the same wherever it recurs),
// `created` / `created_at` (now), and `cost` in its usage (0: CONTRACT §9). Responses echo the
// hit request's own `metadata`, `user`, `safety_identifier` and `prompt_cache_key`; a chat stream
// shows its usage chunk only when the hit asks for it (`stream_options.include_usage`).
import { randomToken } from "../lib/crypto.ts";
import { chatUsage } from "../protocols/pivot.ts";
import type { ClientShape, Json, SseEvent, Usage } from "../protocols/types.ts";

/** One event of a stream: its name, and its data parsed (a string when it is not JSON: `[DONE]`). */
export interface WireEvent {
  event?: string;
  data: Json | string;
}

/** The client's answer: its JSON body, or its stream's events. */
export type Wire = { json: Json; events?: undefined } | { events: WireEvent[]; json?: undefined };

export function wireEvent(ev: SseEvent): WireEvent {
  let data: Json | string = ev.data;
  try {
    const v = JSON.parse(ev.data);
    if (v && typeof v === "object") data = v;
  } catch {
    // not JSON ([DONE]): kept as text
  }
  return ev.event ? { event: ev.event, data } : { data };
}

/** String members that hold an id the gateway or the vendor generated for this answer. */
const ID_KEYS = new Set(["id", "item_id", "call_id", "responseId"]);
/**
 * Members copied as they are: the vendor's own references (an `audio` id a later turn refers to,
 * a `container`), content (annotations, citations, logprobs, a tool call's input) and echoed request
 * settings (tools and their schemas, text format), where an `id` is the answer's text, not its id.
 */
const KEEP = new Set(["audio", "container", "annotations", "citations", "logprobs", "logprobsResult", "input", "args", "tools", "text", "reasoning", "instructions", "metadata", "citationMetadata", "groundingMetadata"]);
const USAGE_KEYS = new Set(["usage", "usageMetadata"]);
const ECHOED = ["metadata", "user", "safety_identifier", "prompt_cache_key"] as const;

/** Fresh ids (one per old id) and the current time, for one write of an answer. */
class Fresh {
  private ids = new Map<string, string>();
  readonly now = Math.floor(Date.now() / 1000);
  id(old: string): string {
    let v = this.ids.get(old);
    if (v === undefined) {
      const prefix = /^[A-Za-z]+[_-]/.exec(old)?.[0] ?? "";
      // An id-shaped value (letters, `_` or `-`, 20 or more letters and digits) stays one, so replay-template.ts finds it.
      v = prefix + randomToken(Math.max(prefix ? 24 : 0, old.length - prefix.length));
      this.ids.set(old, v);
    }
    return v;
  }
}

const isTime = (v: unknown) => typeof v === "number" && Number.isInteger(v) && v >= 1e9 && v < 1e10;

/** A copy of `v` with fresh ids and times and cost 0 in its usage; `parent` is the member `v` is under. */
function refresh(v: unknown, f: Fresh, parent: string): unknown {
  if (Array.isArray(v)) return v.map((x) => refresh(x, f, parent));
  if (!v || typeof v !== "object") return v;
  const out: Json = {};
  for (const k in v as Json) {
    const x = (v as Json)[k];
    if (typeof x === "string" && ID_KEYS.has(k) && x) out[k] = f.id(x);
    else if ((k === "created" || k === "created_at") && isTime(x)) out[k] = f.now;
    else if (k === "cost" && USAGE_KEYS.has(parent) && typeof x === "number") out[k] = 0; // a hit costs nothing (CONTRACT §9)
    else if (KEEP.has(k)) out[k] = x;
    else out[k] = refresh(x, f, k);
  }
  return out;
}

/** A Responses answer echoes who asked: the hit request's own fields, as the vendor would have. */
function echo(response: Json, request: Json): void {
  for (const k of ECHOED) if (k in response) response[k] = request[k] ?? (k === "metadata" ? {} : null);
}

/** The answer as the JSON body of the client's protocol, fresh (ids, times, cost 0). */
export function renderJson(shape: ClientShape, request: Json, wire: Wire, usage: Usage | null): string {
  const f = new Fresh();
  const json = wire.json ?? jsonOfEvents(shape, wire.events!, usage);
  const out = refresh(json, f, "") as Json;
  if (shape === "responses") echo(out, request);
  return JSON.stringify(out);
}

/** The answer as the SSE of the client's protocol, fresh: one piece per event. */
export function renderSse(shape: ClientShape, request: Json, wire: Wire, usage: Usage | null): string[] {
  const f = new Fresh();
  let events = wire.events ?? eventsOfJson(shape, wire.json!, request);
  if (shape === "chat") events = chatUsageAsAsked(events, request, usage);
  return events.map((ev) => {
    let data = ev.data;
    if (typeof data === "object") {
      data = refresh(data, f, "") as Json;
      if (shape === "responses" && data.response && typeof data.response === "object") echo(data.response, request);
    }
    return `${ev.event ? `event: ${ev.event}\n` : ""}data: ${typeof data === "string" ? data : JSON.stringify(data)}\n\n`;
  });
}

// ---- chat ----

const isUsageChunk = (d: unknown) => typeof d === "object" && d !== null && Array.isArray((d as Json).choices) && (d as Json).choices.length === 0 && !!(d as Json).usage;

/** A chat stream shows its usage chunk only to a client that asked (stream_options.include_usage), as live. */
function chatUsageAsAsked(events: WireEvent[], request: Json, usage: Usage | null): WireEvent[] {
  const wants = request.stream_options?.include_usage === true;
  const has = events.some((e) => isUsageChunk(e.data));
  if (wants === has || (wants && !usage)) return events;
  if (!wants) return events.filter((e) => !isUsageChunk(e.data));
  const last = [...events].reverse().find((e) => typeof e.data === "object" && Array.isArray((e.data as Json).choices));
  const { choices: _c, usage: _u, obfuscation: _o, ...base } = (last?.data ?? {}) as Json;
  const chunk: WireEvent = { data: { ...base, choices: [], usage: chatUsage(usage!) } };
  const done = events.findIndex((e) => e.data === "[DONE]");
  return done < 0 ? [...events, chunk] : [...events.slice(0, done), chunk, ...events.slice(done)];
}

/** Members of a delta that are set, not appended to, when deltas accumulate. */
const SET_KEYS = new Set(["role", "id", "type", "expires_at", "index", "name"]);

/** Adds one delta to the message so far: text appended, tool calls by index, lists joined, objects merged. */
function mergeDelta(acc: Json, delta: Json): void {
  for (const k in delta) {
    const v = delta[k];
    if (v === null || v === undefined) {
      if (acc[k] === undefined) acc[k] = null;
    } else if (typeof v === "string") {
      acc[k] = SET_KEYS.has(k) || typeof acc[k] !== "string" ? v : acc[k] + v;
    } else if (Array.isArray(v)) {
      if (k === "tool_calls") {
        const calls: Json[] = (acc[k] ??= []);
        for (const tc of v) {
          const i = typeof tc?.index === "number" ? tc.index : 0;
          mergeDelta((calls[i] ??= {}), tc);
        }
      } else {
        if (!Array.isArray(acc[k])) acc[k] = [];
        for (const x of v) acc[k].push(x); // in place: linear however many deltas carry a list
      }
    } else if (typeof v === "object") {
      mergeDelta((acc[k] = acc[k] && typeof acc[k] === "object" ? acc[k] : {}), v);
    } else acc[k] = v;
  }
}

/** Chunk logprobs joined: each list of tokens (content, refusal) in order (appended in place: linear in the tokens). */
function mergeLogprobs(acc: Json | null, lp: Json): Json {
  const out: Json = acc ?? {};
  for (const k in lp) {
    if (Array.isArray(lp[k])) {
      if (!Array.isArray(out[k])) out[k] = [];
      for (const x of lp[k]) out[k].push(x);
    } else if (out[k] === undefined || lp[k] !== null) out[k] = lp[k];
  }
  return out;
}

/** A chat stream → the chat.completion it adds up to (every member of its chunks and choices kept). */
function chatOfChunks(events: WireEvent[], usage: Usage | null): Json {
  let top: Json | null = null;
  const message: Json = {};
  let logprobs: Json | null = null;
  let finish: string | null = null;
  const choiceExtra: Json = {};
  let u: Json | null = null;
  for (const { data } of events) {
    if (typeof data !== "object" || !Array.isArray(data.choices)) continue;
    // `obfuscation` pads a stream's chunks to hide their sizes: it is the stream's, not the answer's.
    const { choices, usage: cu, object: _o, obfuscation: _x, ...rest } = data;
    top = { ...(top ?? {}), ...rest };
    if (cu) u = cu;
    const c = choices.find((x: Json) => (x?.index ?? 0) === 0);
    if (!c) continue;
    const { delta, logprobs: lp, finish_reason, index: _i, ...more } = c;
    if (delta && typeof delta === "object") mergeDelta(message, delta);
    if (lp && typeof lp === "object") logprobs = mergeLogprobs(logprobs, lp);
    if (typeof finish_reason === "string") finish = finish_reason;
    Object.assign(choiceExtra, more);
  }
  const { id, created, model, ...others } = top ?? {};
  const msg: Json = { role: "assistant", content: null, refusal: null, ...message };
  if (Array.isArray(msg.tool_calls)) msg.tool_calls = msg.tool_calls.filter(Boolean).map(({ index: _i, ...tc }: Json) => tc);
  const out: Json = { id, object: "chat.completion", created, model, ...others, choices: [{ index: 0, message: msg, logprobs, finish_reason: finish ?? "stop", ...choiceExtra }] };
  if (u) out.usage = u;
  else if (usage) out.usage = chatUsage(usage);
  return out;
}

/** Splits text into pieces of a few words (their concatenation is the text). */
export function pieces(text: string, words = 4): string[] {
  const parts = text.match(/\S+\s*|\s+/g) ?? [text];
  const out: string[] = [];
  for (let i = 0; i < parts.length; i += words) out.push(parts.slice(i, i + words).join(""));
  return out;
}

/** Message members a chat stream carries piece by piece; any other goes whole in one delta. */
const CHAT_STREAMED = new Set(["role", "content", "refusal", "tool_calls", "reasoning_content", "reasoning", "reasoning_blocks"]);

/** A chat.completion → the chunks a stream of it carries: every member of the answer, in deltas that add up to it. */
function chunksOfChat(completion: Json): WireEvent[] {
  const { choices, usage, object: _o, ...top } = completion;
  const choice: Json = choices?.[0] ?? {};
  const { message = {}, logprobs, finish_reason, index: _i, ...choiceExtra } = choice;
  const base: Json = { id: top.id, object: "chat.completion.chunk", created: top.created, model: top.model, ...top };
  const out: WireEvent[] = [];
  // The tokens' logprobs go once, with the first piece of text (or with the finish when there is none).
  let lpDue = !!logprobs;
  const d = (delta: Json, end: Json = {}) => {
    let lp: Json | null = null;
    if (lpDue && ((typeof delta.content === "string" && delta.content) || (typeof delta.refusal === "string" && delta.refusal) || end.finish_reason)) {
      lp = logprobs;
      lpDue = false;
    }
    out.push({ data: { ...base, choices: [{ index: 0, delta, logprobs: lp, finish_reason: null, ...end }] } });
  };
  d({ role: "assistant", content: "", refusal: null });
  for (const f of ["reasoning_content", "reasoning"]) if (typeof message[f] === "string" && message[f]) for (const p of pieces(message[f])) d({ [f]: p });
  if (typeof message.content === "string") for (const p of pieces(message.content)) d({ content: p });
  if (typeof message.refusal === "string" && message.refusal) d({ refusal: message.refusal });
  if (Array.isArray(message.tool_calls)) {
    message.tool_calls.forEach((tc: Json, index: number) => {
      const { function: fn = {}, ...call } = tc;
      d({ tool_calls: [{ index, ...call, function: { ...fn, arguments: "" } }] });
      for (const p of pieces(typeof fn.arguments === "string" ? fn.arguments : "", 8)) d({ tool_calls: [{ index, function: { arguments: p } }] });
    });
  }
  const rest: Json = {};
  for (const k in message) if (!CHAT_STREAMED.has(k) && message[k] !== null && message[k] !== undefined) rest[k] = message[k];
  if (Object.keys(rest).length) d(rest);
  d({}, { finish_reason: finish_reason ?? "stop", ...choiceExtra });
  if (usage) out.push({ data: { ...base, choices: [], usage } });
  out.push({ data: "[DONE]" });
  return out;
}

// ---- Messages ----

/** A Messages stream → the message it adds up to (as the Anthropic SDK's stream reader builds it). */
function messageOfEvents(events: WireEvent[]): Json {
  let msg: Json = { content: [] };
  const json: Record<number, string> = {};
  for (const { data: e } of events) {
    if (typeof e !== "object") continue;
    if (e.type === "message_start") msg = { ...e.message, content: [...(e.message?.content ?? [])] };
    else if (e.type === "content_block_start") {
      const b = { ...e.content_block };
      if (Array.isArray(b.citations)) b.citations = [...b.citations]; // appended to below: never the stored event's own list
      msg.content[e.index] = b;
    }
    else if (e.type === "content_block_delta") {
      const b = msg.content[e.index];
      const d = e.delta ?? {};
      if (!b) continue;
      if (d.type === "text_delta") b.text = (b.text ?? "") + d.text;
      else if (d.type === "input_json_delta") json[e.index] = (json[e.index] ?? "") + d.partial_json;
      else if (d.type === "thinking_delta") b.thinking = (b.thinking ?? "") + d.thinking;
      else if (d.type === "signature_delta") b.signature = d.signature;
      else if (d.type === "citations_delta") (b.citations ??= []).push(d.citation);
    } else if (e.type === "content_block_stop") {
      const s = json[e.index];
      if (s !== undefined && msg.content[e.index]) msg.content[e.index].input = s ? JSON.parse(s) : {};
    } else if (e.type === "message_delta") {
      Object.assign(msg, e.delta ?? {});
      if (e.usage) msg.usage = { ...(msg.usage ?? {}), ...e.usage };
    }
  }
  msg.content = msg.content.filter(Boolean);
  return msg;
}

/** A Messages answer → the events a stream of it carries (their sum is the message). */
function eventsOfMessage(m: Json): WireEvent[] {
  const { content = [], stop_reason, stop_sequence, usage, ...head } = m;
  const out: WireEvent[] = [];
  const ev = (data: Json) => out.push({ event: data.type, data });
  ev({ type: "message_start", message: { ...head, content: [], stop_reason: null, stop_sequence: null, usage: { ...(usage ?? {}), output_tokens: 0 } } });
  (content as Json[]).forEach((b, index) => {
    const delta = (d: Json) => ev({ type: "content_block_delta", index, delta: d });
    if (b.type === "text") {
      const { text = "", citations, ...rest } = b;
      ev({ type: "content_block_start", index, content_block: { ...rest, text: "", ...(citations ? { citations: [] } : {}) } });
      for (const c of citations ?? []) delta({ type: "citations_delta", citation: c });
      for (const p of pieces(text)) delta({ type: "text_delta", text: p });
    } else if (b.type === "tool_use" || b.type === "server_tool_use") {
      ev({ type: "content_block_start", index, content_block: { ...b, input: {} } });
      delta({ type: "input_json_delta", partial_json: JSON.stringify(b.input ?? {}) });
    } else if (b.type === "thinking") {
      const { thinking = "", signature, ...rest } = b;
      ev({ type: "content_block_start", index, content_block: { ...rest, thinking: "", signature: "" } });
      for (const p of pieces(thinking)) delta({ type: "thinking_delta", thinking: p });
      if (signature) delta({ type: "signature_delta", signature });
    } else ev({ type: "content_block_start", index, content_block: b });
    ev({ type: "content_block_stop", index });
  });
  ev({ type: "message_delta", delta: { stop_reason, stop_sequence: stop_sequence ?? null }, usage: usage ?? {} });
  ev({ type: "message_stop" });
  return out;
}

// ---- Responses ----

/** A Responses answer → the events a stream of it carries, each item's pieces in order, the answer whole in response.completed. */
function eventsOfResponse(r: Json): WireEvent[] {
  const out: WireEvent[] = [];
  const ev = (type: string, data: Json) => out.push({ event: type, data: { type, ...data, sequence_number: out.length } });
  const { output = [], usage: _u, ...head } = r;
  const opening = { ...head, status: "in_progress", output: [] }; // no usage yet (the schema has no null usage)
  ev("response.created", { response: opening });
  ev("response.in_progress", { response: opening });
  (output as Json[]).forEach((item, output_index) => {
    const item_id = item.id;
    if (item.type === "message") {
      ev("response.output_item.added", { output_index, item: { ...item, status: "in_progress", content: [] } });
      (item.content ?? []).forEach((part: Json, content_index: number) => {
        const at = { item_id, output_index, content_index };
        if (part.type === "output_text") {
          const { text = "", annotations = [], logprobs = [] } = part;
          ev("response.content_part.added", { ...at, part: { ...part, text: "", annotations: [], logprobs: [] } });
          // The tokens' logprobs go with the first piece of text.
          pieces(text).forEach((delta, i) => ev("response.output_text.delta", { ...at, delta, logprobs: i === 0 ? logprobs : [] }));
          (annotations as Json[]).forEach((annotation, annotation_index) => ev("response.output_text.annotation.added", { ...at, annotation_index, annotation }));
          ev("response.output_text.done", { ...at, text, logprobs });
        } else if (part.type === "refusal") {
          ev("response.content_part.added", { ...at, part: { ...part, refusal: "" } });
          ev("response.refusal.delta", { ...at, delta: part.refusal ?? "" });
          ev("response.refusal.done", { ...at, refusal: part.refusal ?? "" });
        } else ev("response.content_part.added", { ...at, part });
        ev("response.content_part.done", { ...at, part });
      });
    } else if (item.type === "reasoning") {
      ev("response.output_item.added", { output_index, item: { ...item, summary: [], ...(item.encrypted_content !== undefined ? { encrypted_content: null } : {}) } });
      (item.summary ?? []).forEach((p: Json, summary_index: number) => {
        const at = { item_id, output_index, summary_index };
        ev("response.reasoning_summary_part.added", { ...at, part: { ...p, text: "" } });
        for (const delta of pieces(p.text ?? "")) ev("response.reasoning_summary_text.delta", { ...at, delta });
        ev("response.reasoning_summary_text.done", { ...at, text: p.text ?? "" });
        ev("response.reasoning_summary_part.done", { ...at, part: p });
      });
    } else if (item.type === "function_call") {
      ev("response.output_item.added", { output_index, item: { ...item, status: "in_progress", arguments: "" } });
      for (const delta of pieces(item.arguments ?? "", 8)) ev("response.function_call_arguments.delta", { item_id, output_index, delta });
      ev("response.function_call_arguments.done", { item_id, output_index, name: item.name, arguments: item.arguments ?? "" });
    } else if (item.type === "custom_tool_call") {
      ev("response.output_item.added", { output_index, item: { ...item, status: "in_progress", input: "" } });
      if (item.input) ev("response.custom_tool_call_input.delta", { item_id, output_index, delta: item.input });
      ev("response.custom_tool_call_input.done", { item_id, output_index, input: item.input ?? "" });
    } else ev("response.output_item.added", { output_index, item });
    ev("response.output_item.done", { output_index, item });
  });
  ev(r.status === "incomplete" ? "response.incomplete" : "response.completed", { response: r });
  return out;
}

// ---- Gemini ----

/** Gemini stream chunks → the one GenerateContentResponse they add up to (parts joined, the last of each other member). */
function geminiOfChunks(events: WireEvent[]): Json {
  const out: Json = {};
  const cand: Json = { content: { parts: [] as Json[], role: "model" } };
  for (const { data } of events) {
    if (typeof data !== "object") continue;
    const { candidates, ...top } = data;
    Object.assign(out, top);
    const c = Array.isArray(candidates) ? candidates.find((x: Json) => (x?.index ?? 0) === 0) : undefined;
    if (!c) continue;
    const { content, logprobsResult, citationMetadata, ...rest } = c;
    if (content?.role) cand.content.role = content.role;
    for (const p of content?.parts ?? []) {
      const last = cand.content.parts.at(-1);
      // Text pieces of one kind (thought or answer) join into one part, as a JSON answer carries it.
      if (last && typeof p.text === "string" && typeof last.text === "string" && Object.keys(p).every((k) => k === "text" || p[k] === last[k]) && Object.keys(last).every((k) => k === "text" || p[k] === last[k])) last.text += p.text;
      else cand.content.parts.push({ ...p });
    }
    if (logprobsResult) {
      const acc: Json = (cand.logprobsResult ??= {});
      for (const k in logprobsResult) {
        if (!Array.isArray(logprobsResult[k])) acc[k] = logprobsResult[k];
        else for (const x of logprobsResult[k]) (acc[k] ??= []).push(x);
      }
    }
    if (citationMetadata) for (const c of citationMetadata.citationSources ?? []) ((cand.citationMetadata ??= { citationSources: [] }).citationSources as Json[]).push(c);
    Object.assign(cand, rest);
  }
  return { candidates: [cand], ...out };
}

// ---- per protocol ----

function jsonOfEvents(shape: ClientShape, events: WireEvent[], usage: Usage | null): Json {
  if (shape === "chat") return chatOfChunks(events, usage);
  if (shape === "anthropic") return messageOfEvents(events);
  if (shape === "gemini") return geminiOfChunks(events);
  // Responses: the closing event carries the whole response.
  for (let i = events.length - 1; i >= 0; i--) {
    const d = events[i]!.data;
    if (typeof d === "object" && (d.type === "response.completed" || d.type === "response.incomplete") && d.response) return d.response;
  }
  throw new Error("a stored Responses stream without response.completed");
}

/** A JSON answer → its stream's events. */
function eventsOfJson(shape: ClientShape, json: Json, _request: Json): WireEvent[] {
  if (shape === "chat") return chunksOfChat(json);
  if (shape === "responses") return eventsOfResponse(json);
  if (shape === "anthropic") return eventsOfMessage(json);
  if (shape === "gemini") return [{ data: json }]; // one chunk that is the whole answer: a Gemini stream may be that
  throw new Error(`no stream of a stored ${shape} JSON answer`);
}
