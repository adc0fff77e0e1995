// POST /v1/responses (non-streaming by default; STREAM=1 streams) on an OpenAI lane.
// Thresholds as for chat: p50 under P50_MS against the loopback mock, no failures.
//   k6 run bench/k6/responses.ts -e ROUTING_KEY=gw_… [-e UPSTREAM_URL=…] [-e STREAM=1]
import type { Options } from "k6/options";
import { DURATION, MODEL, VUS, checkJson, checkStream, envNumber, post, requireKey, scenarios, withMock, type Target } from "./lib/common.ts";

const STREAM = __ENV.STREAM === "1";
const P50_MS = envNumber("P50_MS", 2);
const P99_MS = envNumber("P99_MS", 25);

export const options: Options = {
  scenarios: scenarios({ executor: "constant-vus", vus: VUS, duration: DURATION }),
  thresholds: {
    "http_req_failed{target:gateway}": ["rate==0"],
    [STREAM ? "http_req_waiting{target:gateway}" : "http_req_duration{target:gateway}"]: [`p(50)<${P50_MS}`, `p(99)<${P99_MS}`],
    "checks{target:gateway}": ["rate==1"],
  },
};

export function setup(): void {
  requireKey();
}

const body = withMock(
  { model: MODEL, input: "Summarise the last deployment log in one sentence.", max_output_tokens: 256, ...(STREAM ? { stream: true } : {}) },
  { chunks: 20 },
);

function run(target: Target): void {
  const res = post(target, "/responses", body, STREAM ? "responses stream" : "responses");
  if (STREAM) checkStream(res, "response.completed", 20);
  else checkJson(res, "response");
}

export function gateway(): void {
  run("gateway");
}

export function direct(): void {
  run("direct");
}
