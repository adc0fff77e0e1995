// Bridge health checks (CONTRACT §5): every BRIDGE_HEALTH_INTERVAL_SECONDS, GET {base_url}/health
// for each live bridge. 2xx → `healthy`; anything else (other status, redirect, timeout, refused
// connection, or an address the SSRF guard refuses) → `unhealthy` with `last_error`. The probe
// connects exactly as an inference call does (bridgeFetch: pinned to the checked address).
// `last_health_at` records every check. A status change publishes an account invalidation so
// instances holding the account's keys in cache see the new state at once.
// Every instance runs the job, and the first to claim an interval probes (fleetIntervalJob): a fleet
// of thirty instances probes each bridge once an interval, not thirty times.
import { and, eq, isNull } from "drizzle-orm";
import type { Base } from "../base.ts";
import { GatewayError } from "../errors.ts";
import { fleetIntervalJob, type Job } from "./job.ts";
import { bridges } from "../store/db/schema/index.ts";
import { publishInvalidation, type Publishing } from "../store/invalidation.ts";
import { bridgeFetch } from "../providers/bridge/connect.ts";
import type { AdapterEnv } from "../providers/env.ts";
import { activeBridges, type BridgeRow } from "../management/bridges/service.ts";

/** Checks at once, so one slow bridge cannot hold up the rest. */
const CONCURRENCY = 8;
const MAX_TIMEOUT_MS = 10_000;

/** What the checks use: the stores and settings, the bridge connect path (an adapter's environment), and the key cache a status change invalidates. */
export type BridgeHealthDeps = Base & AdapterEnv & Publishing;

export interface HealthResult {
  status: "healthy" | "unhealthy";
  error: string | null;
}

export async function probeBridge(ctx: AdapterEnv, baseUrl: string, timeoutMs: number): Promise<HealthResult> {
  let url: URL;
  try {
    url = new URL(`${baseUrl}/health`);
  } catch {
    return { status: "unhealthy", error: "The bridge base_url is not a valid URL." };
  }
  try {
    // The same connect path as an inference call: resolved, checked, and connected to the very
    // address checked (no second DNS lookup a rebinding server could answer differently), and no
    // redirects (a bridge must answer itself).
    const res = await bridgeFetch(ctx, url.toString(), { method: "GET", headers: {}, signal: AbortSignal.timeout(timeoutMs) });
    await res.body?.cancel();
    if (res.status >= 200 && res.status <= 299) return { status: "healthy", error: null };
    return { status: "unhealthy", error: `GET /health answered HTTP ${res.status}.` };
  } catch (e) {
    if (e instanceof GatewayError) return { status: "unhealthy", error: e.message };
    const timedOut = e instanceof Error && (e.name === "TimeoutError" || e.name === "AbortError");
    return { status: "unhealthy", error: timedOut ? `GET /health did not answer within ${Math.round(timeoutMs / 1000)} s.` : "GET /health failed: the bridge could not be reached." };
  }
}

async function checkOne(ctx: BridgeHealthDeps, b: BridgeRow, timeoutMs: number): Promise<boolean> {
  const r = await probeBridge(ctx, b.baseUrl, timeoutMs);
  const now = new Date();
  const changed = r.status !== b.status;
  // A bridge revoked while its check ran stays untouched.
  const updated = await ctx.db.update(bridges)
    .set({ status: r.status, lastError: r.error, lastHealthAt: now, ...(changed ? { updatedAt: now } : {}) })
    .where(and(eq(bridges.id, b.id), isNull(bridges.revokedAt)))
    .returning({ id: bridges.id });
  if (changed && updated.length > 0) {
    ctx.log.info({ bridgeId: b.id, accountId: b.accountId, from: b.status, to: r.status }, "bridge health changed");
    await publishInvalidation(ctx, { kind: "account", accountId: b.accountId });
  }
  return changed;
}

/** One round over every live bridge. Returns how many changed status. */
export async function checkBridges(ctx: BridgeHealthDeps): Promise<number> {
  const timeoutMs = Math.min(MAX_TIMEOUT_MS, Math.max(1000, ctx.config.BRIDGE_HEALTH_INTERVAL_SECONDS * 1000));
  const queue = await activeBridges(ctx.db);
  let changed = 0;
  const worker = async () => {
    for (let b = queue.shift(); b; b = queue.shift()) {
      try {
        if (await checkOne(ctx, b, timeoutMs)) changed++;
      } catch (e) {
        ctx.log.warn({ bridgeId: b.id, err: e instanceof Error ? e.message : String(e) }, "bridge health check failed to record");
      }
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  return changed;
}

export function bridgeHealthJob(ctx: BridgeHealthDeps): Job {
  return fleetIntervalJob(ctx, "bridge-health", ctx.config.BRIDGE_HEALTH_INTERVAL_SECONDS * 1000, async () => { await checkBridges(ctx); });
}
