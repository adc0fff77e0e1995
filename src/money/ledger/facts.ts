// What an in-flight entry says about its request, and the `interrupted` record written from it
// when its instance died before settling (CONTRACT §7).
import { sanitizeUsageRow, type UsageRow } from "../../relay/usage-queue.ts";
import { fromNano } from "../counters.ts";
import type { EntryFacts, FactsJson } from "./types.ts";

/** Builds entries' facts; the part fixed per key, endpoint and month is built once. */
export class FactsCache {
  private head = new Map<string, string>();

  constructor(private instance: string) {}

  /** `extra`: more fields, already as JSON (`,"l":…`), written in the same string (leasedFacts). */
  facts(key: { id: string; accountId: string; lanes: Array<{ provider: string }> }, endpoint: string, model: string | null, month: string, requestId: string | null = null, extra = ""): FactsJson {
    const hk = `${key.id}|${endpoint}|${month}`;
    let head = this.head.get(hk);
    if (head === undefined) {
      if (this.head.size > 10_000) this.head.clear();
      head = JSON.stringify({ i: this.instance, m: month, a: key.accountId, e: endpoint, p: key.lanes[0]?.provider ?? "unknown", s: false }).slice(0, -1);
      this.head.set(hk, head);
    }
    return `${head},"t":${Date.now()},"md":${model === null ? "null" : JSON.stringify(model)},"r":${requestId === null ? "null" : JSON.stringify(requestId)}${extra}}` as FactsJson;
  }
}

/** A lease's own entry: marked, so a reconciler gives what it still holds back instead of charging it. */
export const leaseFacts = (facts: FactsJson): FactsJson => `${facts.slice(0, -1)},"ls":1}` as FactsJson;

/**
 * The extra facts (FactsCache.facts' `extra`) of a request admitted from lease `lease` with worst
 * case `nano`: the reconciler writes its `interrupted` record at `nano`, moved out of the lease's
 * entry like a settlement. (A lease's id is the gateway's own money-call id: no JSON escaping.)
 */
export const leasedFacts = (lease: string, nano: number): string => `,"l":"${lease}","w":${Math.round(nano)}`;

/** The record of a request whose instance died: its reserved (unsettled) cost, estimated; sanitised (it is streamed as it is). */
export function interruptedRow(keyId: string, uid: string, f: EntryFacts, nano: number, now: number): UsageRow {
  return sanitizeUsageRow({
    requestId: f.r ?? null, recordKey: `${uid}.0`, accountId: f.a, routingKeyId: keyId, endpoint: f.e, laneIndex: null, provider: f.p, model: f.md,
    status: 0, outcome: "interrupted", errorCode: "gateway_instance_lost", attempt: 0,
    promptTokens: 0, completionTokens: 0, cachedTokens: 0, cacheWriteTokens: 0,
    costUsd: fromNano(nano), priceEstimated: true, priceSource: "fallback", latencyMs: Math.max(0, now - f.t), ttfbMs: null, seat: f.s,
    tags: Array.isArray(f.tg) && f.tg.length > 0 ? f.tg : null,
    createdAt: new Date(f.t).toISOString(),
  });
}
