// Streaming chat completions, 20 chunks sent back to back by the upstream.
// Targets: ≤ 1 ms added time to first byte, so against the loopback mock the gateway's time to
// first byte (k6 `http_req_waiting`) stays under TTFB_P50_MS (2 ms) at the median.
//   k6 run bench/k6/stream.ts -e ROUTING_KEY=gw_… [-e UPSTREAM_URL=http://127.0.0.1:9100/v1]
import type { Options } from "k6/options";
import { Trend } from "k6/metrics";
import { DURATION, MODEL, PROMPT, VUS, checkStream, envNumber, post, requireKey, scenarios, withMock, type Target } from "./lib/common.ts";

const CHUNKS = envNumber("CHUNKS", 20);
const TTFB_P50_MS = envNumber("TTFB_P50_MS", 2);
const TTFB_P99_MS = envNumber("TTFB_P99_MS", 25);
const ttfb = new Trend("stream_time_to_first_byte", true);

export const options: Options = {
  scenarios: scenarios({ executor: "constant-vus", vus: VUS, duration: DURATION }),
  thresholds: {
    "http_req_failed{target:gateway}": ["rate==0"],
    "stream_time_to_first_byte{target:gateway}": [`p(50)<${TTFB_P50_MS}`, `p(99)<${TTFB_P99_MS}`],
    "checks{target:gateway}": ["rate==1"],
  },
};

export function setup(): void {
  requireKey();
}

const body = withMock(
  { model: MODEL, messages: PROMPT, max_tokens: 256, stream: true, stream_options: { include_usage: true } },
  { chunks: CHUNKS, chunk_delay_ms: 0 },
);

function run(target: Target): void {
  const res = post(target, "/chat/completions", body, "chat stream");
  ttfb.add(res.timings.waiting, { target });
  checkStream(res, "[DONE]", CHUNKS);
}

export function gateway(): void {
  run("gateway");
}

export function direct(): void {
  run("direct");
}
