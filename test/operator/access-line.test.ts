// The access line is built by hand (src/http/access-log.ts accessJson) instead of through pino:
// it must be exactly the line pino's `access` child logger writes for the same fields, whatever
// the strings hold (quotes, backslashes, control characters, non-ASCII), so log pipelines see
// one format.
import { describe, expect, test } from "bun:test";
import { Writable } from "node:stream";
import pino from "pino";
import { accessJson, RequestTracker, type AccessEntry } from "../../src/http/access-log.ts";

function pinoLine(fields: Record<string, unknown>, time: number): string {
  let out = "";
  const dest = new Writable({ write(chunk, _e, cb) { out += String(chunk); cb(); } });
  const log = pino({ level: "info", base: undefined, timestamp: () => `,"time":${time}` }, dest as any).child({ log: "access" });
  log.info(fields, "request");
  return out;
}

function entry(over: Partial<AccessEntry>): AccessEntry {
  const e = new RequestTracker().open("req-1", "POST", "/v1/chat/completions");
  Object.assign(e, { endedAt: e.startedAt + 12.3456, status: 200 }, over);
  return e;
}

const expectedFields = (e: AccessEntry) => {
  const f: Record<string, unknown> = { request_id: e.requestId, method: e.method, route: e.route, status: e.status, duration_ms: Math.round((e.endedAt - e.startedAt) * 100) / 100 };
  if (e.ttfbMs !== null) f.ttfb_ms = e.ttfbMs;
  if (e.keyPrefix !== null) f.key_prefix = e.keyPrefix;
  if (e.model !== null) f.model = e.model;
  if (e.lanes !== null) {
    f.lanes = e.lanes.map((l) => (l.code ? { provider: l.provider, lane: l.lane, status: l.status, code: l.code } : { provider: l.provider, lane: l.lane, status: l.status }));
    f.served_by = e.served;
    f.input_tokens = e.inputTokens;
    f.output_tokens = e.outputTokens;
    f.cost_usd = e.costUsd;
  }
  if (e.outcome !== null) f.outcome = e.outcome;
  return f;
};

describe("access line", () => {
  const cases: Array<[string, Partial<AccessEntry>]> = [
    ["a bare request (no key, no lanes)", { route: "(no route)", status: 404 }],
    ["a relayed request with two lanes, one failed over", {
      keyPrefix: "gw_AbC1234", model: "gpt-4o-mini", ttfbMs: 3.21, served: "groq", inputTokens: 17, outputTokens: 5, costUsd: 0.0000045, outcome: "ok",
      lanes: [{ provider: "openai", lane: 0, status: 503, code: "upstream_error", startedAt: 0 }, { provider: "groq", lane: 1, status: 200, startedAt: 0 }],
    }],
    ["strings that need escaping", { requestId: 'a"b\\c\u0001\n', model: "modèle “ü” 😀\u2028", route: "/v1/x\ty", outcome: "error", served: null, lanes: [] }],
  ];
  for (const [name, over] of cases) {
    test(`byte-equal to pino's line: ${name}`, () => {
      const e = entry(over);
      const time = 1795558810641;
      expect(accessJson(e, time)).toBe(pinoLine(expectedFields(e), time));
    });
  }
});
