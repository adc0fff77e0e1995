// k6 load test for POST /blitz: many virtual users each sending a full batch of prompts through
// one routing key. What it measures: whole-batch latency (a batch should take about one upstream
// latency, not one per prompt), prompts served per second, and how many prompts came back as
// error entries inside a 200.
//
//   k6 run bench/k6/blitz.ts -e GATEWAY_URL=http://127.0.0.1:8080 -e ROUTING_KEY=gw_...
//
// Env: GATEWAY_URL (default http://127.0.0.1:8080), ROUTING_KEY (required), MODEL (gpt-4o-mini),
// PROMPTS per batch (50), VUS (20), DURATION (30s), MAX_TOKENS (16), BATCH_P95_MS (5000, the latency
// threshold), BATCH_P50_MS (MOCK_LATENCY_MS + 100) and MOCK_LATENCY_MS: when set, each prompt carries `mock: {latency_ms, content}` for
// the loopback mock upstream (test/mocks/openai-upstream.ts); leave it unset against real vendors.
import http from "k6/http";
import { check, fail } from "k6";
import { Counter, Rate, Trend } from "k6/metrics";
import type { Options } from "k6/options";

const BASE = (__ENV.GATEWAY_URL ?? "http://127.0.0.1:8080").replace(/\/+$/, "");
const KEY = __ENV.ROUTING_KEY ?? "";
const MODEL = __ENV.MODEL ?? "gpt-4o-mini";
const PROMPTS = Math.min(50, Math.max(1, Number(__ENV.PROMPTS ?? 50)));
const MAX_TOKENS = Number(__ENV.MAX_TOKENS ?? 16);
const MOCK_LATENCY_MS = __ENV.MOCK_LATENCY_MS ? Number(__ENV.MOCK_LATENCY_MS) : undefined;
const BATCH_P95_MS = Number(__ENV.BATCH_P95_MS ?? 5000);
// The target: with a 300 ms upstream a batch of 50 answers within 400 ms (one upstream latency
// plus at most 100 ms), at the median. Only meaningful against the mock; BATCH_P50_MS overrides.
const BATCH_P50_MS = __ENV.BATCH_P50_MS ? Number(__ENV.BATCH_P50_MS) : MOCK_LATENCY_MS !== undefined ? MOCK_LATENCY_MS + 100 : undefined;

const batchDuration = new Trend("blitz_batch_duration", true);
const promptsServed = new Counter("blitz_prompts_served");
const promptErrors = new Rate("blitz_prompt_error_rate");
const batchOk = new Rate("blitz_batch_ok");

export const options: Options = {
  scenarios: {
    blitz: {
      executor: "constant-vus",
      vus: Number(__ENV.VUS ?? 20),
      duration: __ENV.DURATION ?? "30s",
    },
  },
  thresholds: {
    // Whole batches answer 200 (a failed prompt is an entry, not a failed batch).
    blitz_batch_ok: ["rate>0.99"],
    // A batch runs concurrently: its latency stays near one upstream latency.
    blitz_batch_duration: [`p(95)<${BATCH_P95_MS}`, ...(BATCH_P50_MS !== undefined ? [`p(50)<${BATCH_P50_MS}`] : [])],
    // Prompts answered with an error entry.
    blitz_prompt_error_rate: ["rate<0.01"],
    http_req_failed: ["rate<0.01"],
  },
};

export function setup(): void {
  if (!KEY) fail("Set ROUTING_KEY (a gw_ routing key whose lanes point at the upstream under test).");
}

export default function (): void {
  const prompts = Array.from({ length: PROMPTS }, (_, i) => {
    const text = `Reply with the number ${i} (VU ${__VU}, iteration ${__ITER}).`;
    return MOCK_LATENCY_MS === undefined
      ? text
      : { messages: [{ role: "user", content: text }], mock: { latency_ms: MOCK_LATENCY_MS, content: String(i) } };
  });
  const res = http.post(`${BASE}/blitz`, JSON.stringify({ model: MODEL, max_tokens: MAX_TOKENS, prompts }), {
    headers: { "content-type": "application/json", authorization: `Bearer ${KEY}` },
    timeout: "120s",
    tags: { name: "POST /blitz" },
  });
  batchDuration.add(res.timings.duration);
  let body: { object?: string; results?: Array<{ index: number; status: number; error?: unknown }> } = {};
  try {
    body = res.json() as typeof body;
  } catch {
    // Not JSON: counted as a failed batch below.
  }
  const results = body.results ?? [];
  const ok = check(res, {
    "status is 200": (r) => r.status === 200,
    "object is blitz.result": () => body.object === "blitz.result",
    "one result per prompt, in order": () => results.length === PROMPTS && results.every((r, i) => r.index === i),
  });
  batchOk.add(ok);
  for (const r of results) {
    const failed = r.error !== undefined;
    promptErrors.add(failed);
    if (!failed) promptsServed.add(1);
  }
}
