// Streaming chat completions whose upstream pauses between chunks (default 20 chunks, 20 ms apart).
// A gateway that forwards chunks as they arrive finishes each stream ~19 pauses after the first
// byte, never later; one that batches would also show glued chunks, which k6 cannot see (it reads
// the body whole) but the runner (bench/run.ts, scenario stream-paced) measures per chunk.
// Thresholds: stream duration p50 under 19 × pause + DURATION_SLACK_MS, first byte under TTFB_P50_MS.
//   k6 run bench/k6/stream-paced.ts -e ROUTING_KEY=gw_… [-e UPSTREAM_URL=…] [-e CHUNK_DELAY_MS=20]
import type { Options } from "k6/options";
import { Trend } from "k6/metrics";
import { DURATION, MODEL, PROMPT, checkStream, envNumber, post, requireKey, scenarios, withMock, type Target } from "./lib/common.ts";

const CHUNKS = envNumber("CHUNKS", 20);
const DELAY = envNumber("CHUNK_DELAY_MS", 20);
const SLACK = envNumber("DURATION_SLACK_MS", 15);
const TTFB_P50_MS = envNumber("TTFB_P50_MS", 2);
const streamDuration = new Trend("paced_stream_duration", true);
const ttfb = new Trend("paced_stream_time_to_first_byte", true);

export const options: Options = {
  scenarios: scenarios({ executor: "constant-vus", vus: envNumber("VUS", 64), duration: DURATION }),
  thresholds: {
    "http_req_failed{target:gateway}": ["rate==0"],
    "paced_stream_duration{target:gateway}": [`p(50)<${(CHUNKS - 1) * DELAY + SLACK}`],
    "paced_stream_time_to_first_byte{target:gateway}": [`p(50)<${TTFB_P50_MS}`],
    "checks{target:gateway}": ["rate==1"],
  },
};

export function setup(): void {
  requireKey();
}

const body = withMock(
  { model: MODEL, messages: PROMPT, max_tokens: 256, stream: true, stream_options: { include_usage: true } },
  { chunks: CHUNKS, chunk_delay_ms: DELAY },
);

function run(target: Target): void {
  const res = post(target, "/chat/completions", body, "chat stream paced");
  streamDuration.add(res.timings.duration, { target });
  ttfb.add(res.timings.waiting, { target });
  checkStream(res, "[DONE]", CHUNKS);
}

export function gateway(): void {
  run("gateway");
}

export function direct(): void {
  run("direct");
}
