// Non-streaming chat completions at a fixed number of connections (default 32).
// Targets: the gateway adds ≤ 0.5 ms at the median over the upstream, so against the loopback
// mock (which answers in well under a millisecond) the gateway's p50 stays under P50_MS (2 ms).
//   k6 run bench/k6/chat.ts -e ROUTING_KEY=gw_… [-e UPSTREAM_URL=http://127.0.0.1:9100/v1]
import type { Options } from "k6/options";
import { DURATION, MODEL, PROMPT, VUS, checkJson, envNumber, post, requireKey, scenarios, withMock, type Target } from "./lib/common.ts";

const P50_MS = envNumber("P50_MS", 2);
const P99_MS = envNumber("P99_MS", 25);

export const options: Options = {
  scenarios: scenarios({ executor: "constant-vus", vus: VUS, duration: DURATION }),
  thresholds: {
    "http_req_failed{target:gateway}": ["rate==0"],
    "http_req_duration{target:gateway}": [`p(50)<${P50_MS}`, `p(99)<${P99_MS}`],
    "checks{target:gateway}": ["rate==1"],
  },
};

export function setup(): void {
  requireKey();
}

const body = withMock({ model: MODEL, messages: PROMPT, max_tokens: 256 }, { chunks: 20 });

function run(target: Target): void {
  checkJson(post(target, "/chat/completions", body, "chat"), "chat.completion");
}

export function gateway(): void {
  run("gateway");
}

export function direct(): void {
  run("direct");
}
