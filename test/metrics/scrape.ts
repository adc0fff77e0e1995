// Reads samples out of a Prometheus text exposition.

/** The value of one sample line (`name{labels} value`) with exactly these labels, or undefined. */
export function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split("\n")) {
    if (!line.startsWith(name)) continue;
    const m = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const got: Record<string, string> = {};
    for (const [, k, v] of (m[2] ?? "").matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) got[k!] = v!;
    if (Object.entries(labels).every(([k, v]) => got[k] === v) && Object.keys(got).length === Object.keys(labels).length) return Number(m[3]);
  }
  return undefined;
}

import { RequestTracker, type AccessEntry, type LaneTry } from "../../src/http/access-log.ts";

/** A lane entry of a record, every field set as the relay sets them (access-log.ts newTry). */
export function laneTry(over: Partial<LaneTry> & Pick<LaneTry, "provider" | "lane">): LaneTry {
  return {
    status: 0, code: undefined, startedAt: 0, endedAt: undefined, ttfbMs: null, model: undefined, inputTokens: undefined,
    outputTokens: undefined, outcome: null, latencyMs: 0, upstreamStatus: 0, upstreamCode: null, fellBack: false, ...over,
  };
}

/** A finished request record lasting `ms` (no gateway involved): what the sinks read at its release. */
export function finishedRecord(over: Partial<AccessEntry>, ms = 1, route = "/v1/chat/completions"): AccessEntry {
  const e = new RequestTracker().open("req-1", "POST", route);
  Object.assign(e, over);
  e.endedAt = e.startedAt + ms;
  return e;
}
