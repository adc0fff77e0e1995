// The benchmark scenarios. Each one is the same workload sent DIRECT to the mock upstream and
// THROUGH the gateway (whose only lane points at that mock), so the difference is the gateway; the
// scenarios behind the ratio targets also run through the bare Bun proxy (bench/bare-proxy.ts, the
// floor) and Portkey (the reference TypeScript gateway), pointed at the same mock.
// The mock's behaviour rides in the request body (`mock`), which the gateway and the bare proxy
// forward untouched; Portkey drops unknown body fields, so it gets the same object in `x-mock`.
import type { Shot, JsonShot, StreamShot } from "./loop-client.ts";
import { AGENT_TOOLS, agentMessages } from "./agent-body.ts";

export type Side = "direct" | "gateway" | "bare" | "portkey" | "far" | "base";
/**
 * The proxies measured beside the gateway, in the order they run within a round. `far` is a second
 * gateway process, same stores and key, whose Redis is reached through a delay proxy (Redis 1 ms away);
 * `base` the same gateway built from another tree (`--base-root`: an A/B of two trees in one run).
 */
export type Reference = "bare" | "portkey" | "far" | "base";

export interface Endpoints {
  /** Mock upstream base, including /v1. */
  mockBase: string;
  gatewayBase: string;
  routingKey: string;
  /** The bare Bun proxy (forwards the path to the mock's origin). */
  bareBase?: string;
  /** Portkey's base URL (its /v1 routes, pointed at the mock by headers). */
  portkeyBase?: string;
  /** The second gateway, its Redis behind bench/redis-delay-proxy.ts. */
  farBase?: string;
  /** The gateway of the tree named by --base-root. */
  baseBase?: string;
}

export interface Scenario {
  id: string;
  title: string;
  /** autocannon for plain request/response at a fixed connection count; loop for the rest. */
  driver: "autocannon" | "loop";
  concurrency: number;
  /** What the scenario proves (printed under the table). */
  note: string;
  /** Proxies also run beside the gateway in this scenario (the ratio targets read them). */
  references?: Reference[];
  /** Returns the request factory for one side. */
  shots(side: Side, ep: Endpoints): () => Shot;
}

export const MODEL = "gpt-4o-mini";
const PROMPT = [{ role: "user", content: "Summarise the last deployment log in one sentence." }];

function headers(side: Side, ep: Endpoints, mock: Record<string, unknown> = {}): Record<string, string> {
  // Other sides carry a provider-style key so every side sends the same bytes in the same headers.
  const key = side === "gateway" || side === "far" || side === "base" ? ep.routingKey : "sk-bench-direct-0000000000000000";
  const h: Record<string, string> = { "content-type": "application/json", authorization: `Bearer ${key}` };
  if (side === "portkey") {
    h["x-portkey-provider"] = "openai";
    h["x-portkey-custom-host"] = ep.mockBase;
    h["x-portkey-forward-headers"] = "x-mock";
    h["x-mock"] = JSON.stringify(mock);
  }
  return h;
}

/** Where a side sends `path` (an OpenAI path below /v1). */
function urlOf(side: Side, ep: Endpoints, path: string): string {
  if (side === "direct") return `${ep.mockBase}${path}`;
  const base = side === "gateway" ? ep.gatewayBase : side === "far" ? ep.farBase : side === "base" ? ep.baseBase : side === "bare" ? ep.bareBase : ep.portkeyBase;
  if (!base) throw new Error(`no ${side} endpoint in this run`);
  return `${base}/v1${path}`;
}

const chatUrl = (side: Side, ep: Endpoints) => urlOf(side, ep, "/chat/completions");
const responsesUrl = (side: Side, ep: Endpoints) => urlOf(side, ep, "/responses");

const isObject = (want: string) => (text: string): string | null => {
  try {
    const o = JSON.parse(text) as { object?: string };
    return o.object === want ? null : `expected object "${want}", got ${text.slice(0, 160)}`;
  } catch {
    return `not JSON: ${text.slice(0, 160)}`;
  }
};

export function chatJson(side: Side, ep: Endpoints, mock: Record<string, unknown>, messages: unknown[] = PROMPT): JsonShot {
  return {
    type: "json",
    url: chatUrl(side, ep),
    headers: headers(side, ep, mock),
    body: JSON.stringify({ model: MODEL, messages, max_tokens: 256, mock }),
    check: isObject("chat.completion"),
  };
}

/** What users send: an agent's turn (~4.6 kB: messages, a tool call and its result, three tools). */
export function agentJson(side: Side, ep: Endpoints, mock: Record<string, unknown>): JsonShot {
  return {
    type: "json",
    url: chatUrl(side, ep),
    headers: headers(side, ep, mock),
    body: JSON.stringify({ model: MODEL, messages: agentMessages(), tools: AGENT_TOOLS, tool_choice: "auto", max_tokens: 1024, temperature: 0.2, mock }),
    check: isObject("chat.completion"),
  };
}

export function agentStream(side: Side, ep: Endpoints, mock: Record<string, unknown>): StreamShot {
  return {
    type: "stream",
    url: chatUrl(side, ep),
    headers: headers(side, ep, mock),
    body: JSON.stringify({ model: MODEL, messages: agentMessages(), tools: AGENT_TOOLS, tool_choice: "auto", max_tokens: 1024, temperature: 0.2, stream: true, stream_options: { include_usage: true }, mock }),
    doneMarker: "[DONE]",
    gapEvents: 0,
  };
}

export function chatStream(side: Side, ep: Endpoints, mock: Record<string, unknown>, gapEvents = 0): StreamShot {
  return {
    type: "stream",
    url: chatUrl(side, ep),
    headers: headers(side, ep, mock),
    body: JSON.stringify({ model: MODEL, messages: PROMPT, max_tokens: 256, stream: true, stream_options: { include_usage: true }, mock }),
    doneMarker: "[DONE]",
    gapEvents,
  };
}

export function responsesJson(side: Side, ep: Endpoints, mock: Record<string, unknown>): JsonShot {
  return {
    type: "json",
    url: responsesUrl(side, ep),
    headers: headers(side, ep),
    body: JSON.stringify({ model: MODEL, input: "Summarise the last deployment log in one sentence.", max_output_tokens: 256, mock }),
    check: isObject("response"),
  };
}

export function responsesStream(side: Side, ep: Endpoints, mock: Record<string, unknown>): StreamShot {
  return {
    type: "stream",
    url: responsesUrl(side, ep),
    headers: headers(side, ep),
    body: JSON.stringify({ model: MODEL, input: "Summarise the last deployment log in one sentence.", max_output_tokens: 256, stream: true, mock }),
    doneMarker: "response.completed",
    gapEvents: 0,
  };
}

function blitzCheck(prompts: number) {
  return (text: string): string | null => {
    try {
      const o = JSON.parse(text) as { object?: string; results?: Array<{ index: number; error?: { message?: string } }> };
      if (o.object !== "blitz.result") return `expected blitz.result, got ${text.slice(0, 160)}`;
      if (o.results?.length !== prompts) return `expected ${prompts} results, got ${o.results?.length}`;
      const failed = o.results.find((r) => r.error);
      return failed ? `prompt ${failed.index} failed: ${failed.error?.message ?? "error"}` : null;
    } catch {
      return `not JSON: ${text.slice(0, 160)}`;
    }
  };
}

/** One /blitz batch through the gateway, or the same prompts fanned out concurrently to the mock. */
export function blitz(side: Side, ep: Endpoints, prompts: number, mock: Record<string, unknown>): Shot {
  const items = Array.from({ length: prompts }, (_, i) => ({ messages: [{ role: "user", content: `Classify ticket #${i} by urgency.` }], mock }));
  if (side === "gateway") {
    return {
      type: "json",
      url: `${ep.gatewayBase}/blitz`,
      headers: headers(side, ep),
      body: JSON.stringify({ model: MODEL, max_tokens: 64, prompts: items }),
      check: blitzCheck(prompts),
    };
  }
  return {
    type: "fanout",
    shots: items.map((p) => ({
      type: "json" as const,
      url: chatUrl(side, ep),
      headers: headers(side, ep),
      body: JSON.stringify({ model: MODEL, max_tokens: 64, ...p }),
      check: isObject("chat.completion"),
    })),
  };
}

/** An agent's long conversation: ~16 kB of history, the usual shape of fleet traffic. */
function longHistory(): unknown[] {
  const turns: unknown[] = [{ role: "system", content: "You are a careful coding agent. Answer with a patch." }];
  for (let i = 0; i < 16; i++) {
    turns.push({ role: "user", content: `Step ${i}: ` + "the build log says the test at line 42 fails intermittently; ".repeat(8) });
    turns.push({ role: "assistant", content: `Looked at step ${i}. ` + "the flaky assertion depends on wall-clock ordering; ".repeat(8) });
  }
  return turns;
}

/** Weighted pick among request kinds; the same sequence of kinds on both sides. */
function mixed(side: Side, ep: Endpoints): () => Shot {
  const history = longHistory();
  const kinds: Array<[number, Shot]> = [
    [40, chatStream(side, ep, { chunks: 20, chunk_delay_ms: 10 })],
    [20, chatJson(side, ep, { chunks: 20, latency_ms: 30 })],
    [10, chatJson(side, ep, { chunks: 40, latency_ms: 30 }, history)],
    [15, responsesStream(side, ep, { chunks: 20, chunk_delay_ms: 10 })],
    [12, responsesJson(side, ep, { chunks: 20, latency_ms: 30 })],
    [3, blitz(side, ep, 10, { latency_ms: 30 })],
  ];
  const total = kinds.reduce((a, [w]) => a + w, 0);
  // A fixed pseudo-random sequence (LCG): both sides see the same mix in the same order.
  let seed = 12345;
  return () => {
    seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
    let r = (seed >>> 16) % total;
    for (const [w, shot] of kinds) {
      if (r < w) return shot;
      r -= w;
    }
    return kinds[0]![1];
  };
}

const fixed = (s: Shot) => () => s;

export const PACED_DELAY_MS = 20;
/** The rhythm scenarios (paced-64, paced-512): chunks per stream and the mock's pause between them. */
export const RHYTHM_CHUNKS = 100;
export const RHYTHM_DELAY_MS = 2;
export const BLITZ_UPSTREAM_MS = 300;

export const SCENARIOS: Scenario[] = [
  {
    id: "chat",
    references: ["bare", "portkey"],
    title: "chat, non-streaming, 32 connections",
    driver: "autocannon",
    concurrency: 32,
    note: "POST /v1/chat/completions with an agent's turn (~4.6 kB: messages, a tool call and its result, three tools), 20-token answer, no upstream delay: the gateway's own cost per request and the latency it adds under load.",
    shots: (side, ep) => fixed(agentJson(side, ep, { chunks: 20 })),
  },
  {
    id: "chat-1",
    references: ["bare", "portkey"],
    title: "chat, non-streaming, 1 connection",
    driver: "autocannon",
    concurrency: 1,
    note: "The same request from a single client: the latency the gateway adds when nothing queues.",
    shots: (side, ep) => fixed(agentJson(side, ep, { chunks: 20 })),
  },
  {
    id: "chat-1-redis-far",
    references: ["far"],
    title: "chat, non-streaming, 1 connection, Redis 1 ms away vs local",
    driver: "autocannon",
    concurrency: 1,
    note: "The one-client request on the run's hot budgeted key through a second gateway process whose Redis is behind a loopback proxy holding every chunk 1 ms each way (bench/redis-delay-proxy.ts), beside the gateway with Redis local: what a Redis round trip on the request path costs when Redis is not on the host.",
    shots: (side, ep) => fixed(agentJson(side, ep, { chunks: 20 })),
  },
  {
    id: "stream",
    references: ["bare", "portkey"],
    title: "chat, streaming 20 chunks, 32 streams",
    driver: "loop",
    concurrency: 32,
    note: "The agent's turn with stream: true, 20 content chunks sent back to back: time to first byte and CPU per stream.",
    shots: (side, ep) => fixed(agentStream(side, ep, { chunks: 20, chunk_delay_ms: 0 })),
  },
  {
    id: "stream-500",
    references: ["bare", "portkey"],
    title: "chat, streaming 500 chunks, 32 streams",
    driver: "loop",
    concurrency: 32,
    note: "The agent's turn with stream: true, 500 content chunks sent back to back: what a long answer costs per chunk once the request's fixed cost is spread over it.",
    shots: (side, ep) => fixed(agentStream(side, ep, { chunks: 500, chunk_delay_ms: 0 })),
  },
  {
    id: "stream-1",
    references: ["bare", "portkey"],
    title: "chat, streaming 20 chunks, 1 stream",
    driver: "loop",
    concurrency: 1,
    note: "The same stream from a single client: the time to first byte the gateway adds when nothing queues.",
    shots: (side, ep) => fixed(agentStream(side, ep, { chunks: 20, chunk_delay_ms: 0 })),
  },
  {
    id: "stream-paced",
    title: `chat, streaming 20 chunks ${PACED_DELAY_MS} ms apart, 64 streams`,
    driver: "loop",
    concurrency: 64,
    note: `The upstream pauses ${PACED_DELAY_MS} ms between chunks: each chunk must reach the client as it arrives (gap p50 ≈ ${PACED_DELAY_MS} ms, none glued to the previous one).`,
    shots: (side, ep) => fixed(chatStream(side, ep, { chunks: 20, chunk_delay_ms: PACED_DELAY_MS }, 20)),
  },
  ...[64, 512].map((n): Scenario => ({
    id: `paced-${n}`,
    references: ["bare"],
    title: `chat, streaming ${RHYTHM_CHUNKS} chunks ${RHYTHM_DELAY_MS} ms apart, ${n} streams`,
    driver: "loop",
    concurrency: n,
    note: `Streams keep their rhythm under load: ${n} concurrent streams, each ${RHYTHM_CHUNKS} chunks the mock sends ${RHYTHM_DELAY_MS} ms apart; time to last byte (p50/p99) and the p99 gap between chunks at the client, direct, through the bare Bun proxy and through the gateway.`,
    shots: (side, ep) => fixed(chatStream(side, ep, { chunks: RHYTHM_CHUNKS, chunk_delay_ms: RHYTHM_DELAY_MS }, RHYTHM_CHUNKS)),
  })),
  {
    id: "responses",
    title: "responses, non-streaming, 32 connections",
    driver: "autocannon",
    concurrency: 32,
    note: "POST /v1/responses on an OpenAI lane: the Responses protocol passes through.",
    shots: (side, ep) => fixed(responsesJson(side, ep, { chunks: 20 })),
  },
  {
    id: "blitz",
    title: `/blitz, 50 prompts, ${BLITZ_UPSTREAM_MS} ms upstream, 4 batches in flight`,
    driver: "loop",
    concurrency: 4,
    note: `One batch of 50 prompts whose upstream answers take ${BLITZ_UPSTREAM_MS} ms each; direct = the same 50 requests fanned out by the client.`,
    shots: (side, ep) => fixed(blitz(side, ep, 50, { latency_ms: BLITZ_UPSTREAM_MS })),
  },
  {
    id: "mixed",
    title: "mixed fleet, 64 clients",
    driver: "loop",
    concurrency: 64,
    note: "40% paced chat streams, 30% chat (10% with 16 kB of history), 15% responses streams, 12% responses, 3% /blitz of 10; upstream 30 ms or 10 ms/chunk.",
    shots: mixed,
  },
];

/** The soak: many long-lived paced streams through the gateway, watching its memory. */
export function soakShot(ep: Endpoints): () => Shot {
  return fixed(chatStream("gateway", ep, { chunks: 20, chunk_delay_ms: 50 }));
}
export const SOAK_STREAMS = 500;
