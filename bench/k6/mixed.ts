// A mixed fleet: what a fleet of coding agents sends at once. Per 64 clients (scaled by FLEET):
// 26 paced chat streams, 13 short chats, 6 chats carrying ~16 kB of history, 10 paced Responses
// streams, 7 Responses calls and 2 clients sending /blitz batches of 10. Upstream answers take
// 30 ms (UPSTREAM_MS), streams pause 10 ms between chunks (CHUNK_DELAY_MS).
// Thresholds: no failures, and each kind finishes within the upstream's own time plus SLACK_MS.
//   k6 run bench/k6/mixed.ts -e ROUTING_KEY=gw_… [-e FLEET=2] [-e DURATION=2m]
import http from "k6/http";
import { check } from "k6";
import type { Options, Scenario } from "k6/options";
import {
  DURATION, GATEWAY, MODEL, PROMPT, checkJson, checkStream, envNumber, headers, post, requireKey, withMock,
} from "./lib/common.ts";

const FLEET = envNumber("FLEET", 1);
const UPSTREAM_MS = envNumber("UPSTREAM_MS", 30);
const DELAY = envNumber("CHUNK_DELAY_MS", 10);
const SLACK = envNumber("SLACK_MS", 25);
const STREAM_MS = 19 * DELAY;

const kind = (vus: number, exec: string): Scenario =>
  ({ executor: "constant-vus", vus: Math.max(1, Math.round(vus * FLEET)), duration: DURATION, exec, tags: { target: "gateway", kind: exec } }) as Scenario;

export const options: Options = {
  scenarios: {
    chat_stream: kind(26, "chatStream"),
    chat: kind(13, "chat"),
    chat_history: kind(6, "chatHistory"),
    responses_stream: kind(10, "responsesStream"),
    responses: kind(7, "responses"),
    blitz: kind(2, "blitz"),
  },
  thresholds: {
    http_req_failed: ["rate==0"],
    checks: ["rate==1"],
    "http_req_duration{kind:chat}": [`p(50)<${UPSTREAM_MS + SLACK}`],
    "http_req_duration{kind:chatHistory}": [`p(50)<${UPSTREAM_MS + SLACK}`],
    "http_req_duration{kind:responses}": [`p(50)<${UPSTREAM_MS + SLACK}`],
    "http_req_duration{kind:chatStream}": [`p(50)<${STREAM_MS + SLACK}`],
    "http_req_duration{kind:responsesStream}": [`p(50)<${STREAM_MS + SLACK}`],
    "http_req_duration{kind:blitz}": [`p(50)<${UPSTREAM_MS + 4 * SLACK}`],
  },
};

export function setup(): void {
  requireKey();
}

const history = (() => {
  const turns: unknown[] = [{ role: "system", content: "You are a careful coding agent. Answer with a patch." }];
  for (let i = 0; i < 16; i++) {
    turns.push({ role: "user", content: `Step ${i}: ` + "the build log says the test at line 42 fails intermittently; ".repeat(8) });
    turns.push({ role: "assistant", content: `Looked at step ${i}. ` + "the flaky assertion depends on wall-clock ordering; ".repeat(8) });
  }
  return turns;
})();

const paced = { chunks: 20, chunk_delay_ms: DELAY };
const slow = { chunks: 20, latency_ms: UPSTREAM_MS };

export function chatStream(): void {
  const body = withMock({ model: MODEL, messages: PROMPT, stream: true, stream_options: { include_usage: true } }, paced);
  checkStream(post("gateway", "/chat/completions", body, "chat stream"), "[DONE]", 20);
}

export function chat(): void {
  checkJson(post("gateway", "/chat/completions", withMock({ model: MODEL, messages: PROMPT }, slow), "chat"), "chat.completion");
}

export function chatHistory(): void {
  const body = withMock({ model: MODEL, messages: history }, { chunks: 40, latency_ms: UPSTREAM_MS });
  checkJson(post("gateway", "/chat/completions", body, "chat with history"), "chat.completion");
}

export function responsesStream(): void {
  const body = withMock({ model: MODEL, input: "Summarise the last deployment log.", stream: true }, paced);
  checkStream(post("gateway", "/responses", body, "responses stream"), "response.completed", 20);
}

export function responses(): void {
  checkJson(post("gateway", "/responses", withMock({ model: MODEL, input: "Summarise the last deployment log." }, slow), "responses"), "response");
}

export function blitz(): void {
  const prompts = Array.from({ length: 10 }, (_, i) => withMock({ messages: [{ role: "user", content: `Classify ticket #${i}.` }] }, { latency_ms: UPSTREAM_MS }));
  const res = http.post(`${GATEWAY}/blitz`, JSON.stringify({ model: MODEL, max_tokens: 64, prompts }), { headers: headers("gateway"), timeout: "120s", tags: { name: "blitz" } });
  check(res, {
    "status is 200": (r) => r.status === 200,
    "every prompt answered": (r) => {
      try {
        const results = (r.json() as { results?: Array<{ error?: unknown }> }).results ?? [];
        return results.length === 10 && results.every((x) => x.error === undefined);
      } catch {
        return false;
      }
    },
  });
}
