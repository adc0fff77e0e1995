// Batch work on a vendor batch API (CONTRACT §9 "Batch work"): a /blitz job submitted with
// `completion_window: "24h"`, or a /v1/batches batch, on a key whose first lane is an API-key lane
// of a vendor with a batch API for its endpoint (apis.ts: OpenAI's Batch API, Anthropic's Message
// Batches, Gemini batch mode) goes there instead of the live queue, holding its worst case on the
// key's budget until it ends. Its items are `vendor` and its batch row (blitz_vendor_batches) is
// written with them; from there, any instance's poller:
//   - claims the row (one instance at a time, a claim that lapses when its holder dies),
//   - submits it (upload + create) when it has no vendor batch id yet, and stores the id at once
//     (an item the vendor's protocol cannot express runs live instead),
//   - polls the vendor batch; a cancelled job cancels it at the vendor,
//   - once it ended, turns each result line into its item's outcome and one usage record, in one
//     transaction that only an item still `vendor` passes (a line read twice after a crash is
//     written once), then adds its cost to the key's month counter;
//   - a line the vendor failed, expired or cancelled before it ran (on a job not cancelled) goes
//     back to the live queue once: it runs live through the key's lanes at the live price;
//   - ends the row and releases the hold.
// Lines are priced at the catalog's price times the vendor's documented batch discount.
import { and, asc, eq, inArray, isNull, lt, ne, or, sql } from "drizzle-orm";
import type { Ctx } from "../../context.ts";
import { intervalJob, type Job } from "../../jobs/job.ts";
import type { Json, Usage } from "../../protocols/types.ts";
import { apiKeyOf } from "../../providers/openai/http.ts";
import { priceUsd } from "../../money/pricing.ts";
import { counterKey, seed, toNano, ttl } from "../../money/counters.ts";
import { monthKey } from "../../lib/time.ts";
import type { KeyContext } from "../../relay/key-context.ts";
import type { ResolvedLane } from "../../providers/types.ts";
import { blitzJobItems, blitzJobs, blitzVendorBatches, usageRecords } from "../../store/db/schema/index.ts";
import { endIfLast, getJobRow, type JobRow } from "../jobs/store.ts";
import { rowsOf } from "../../store/db/rows.ts";
import { VendorBatchError } from "./vendor-call.ts";
import { batchDiscount, JOB_ENDPOINT, vendorBatchApis, type ChatLine } from "./apis.ts";

/** How often an instance looks for vendor batches to poll. */
export const VENDOR_POLL_MS = 1000;
/** How long a claim on a vendor batch lasts (its holder renews it each tick; a dead one's lapses). */
const CLAIM_MS = 30_000;

/** What a vendor batch line costs: the catalog's price times the vendor's batch discount. */
export function batchLinePrice(provider: string, model: string, u: Usage): { usd: number; source: string | null; estimated: boolean } {
  const p = priceUsd(provider, model, u, null, null);
  return { usd: p.usd * batchDiscount(provider), source: p.source, estimated: p.estimated };
}

type Row = typeof blitzVendorBatches.$inferSelect;

/**
 * How often an instance with no vendor batch of its own looks for one. Every tick would be an
 * UPDATE a second on every idle instance of the fleet; an instance that holds or just submitted a
 * batch ticks every VENDOR_POLL_MS, the others look this often (a dead holder's claim lapses
 * after CLAIM_MS anyway).
 */
const IDLE_LOOK_MS = 10_000;

export function vendorBatchPoller(ctx: Ctx): Job {
  let busyUntil = 0;
  let lastLook = 0;
  const job = intervalJob(ctx, "blitz-vendor-batches", VENDOR_POLL_MS, async () => {
    const now = Date.now();
    if (now >= busyUntil && now - lastLook < IDLE_LOOK_MS) return;
    lastLook = now;
    const rows = await claim(ctx);
    if (rows.length) busyUntil = now + IDLE_LOOK_MS;
    for (const row of rows) {
      try {
        await step(ctx, row);
      } catch (e) {
        ctx.log.warn({ vendorBatch: row.id, err: e instanceof Error ? e.message : String(e) }, "vendor batch poll failed; it is polled again");
      } finally {
        await ctx.db.update(blitzVendorBatches).set({ claimedBy: null, claimedUntil: null })
          .where(and(eq(blitzVendorBatches.id, row.id), eq(blitzVendorBatches.claimedBy, ctx.instanceId))).catch(() => {});
      }
    }
  });
  // A submit on this instance: look now, and keep ticking at VENDOR_POLL_MS while it is open.
  return { ...job, runOnce: () => { busyUntil = Date.now() + IDLE_LOOK_MS; return job.runOnce(); } };
}

/**
 * Batches one instance takes per tick: a tick's work stays well inside CLAIM_MS (a claim that
 * lapsed mid-upload would let another instance submit the same items again), and a fleet's
 * batches spread over its instances.
 */
const CLAIM_MAX = 16;

/** Takes up to CLAIM_MAX unclaimed (or lapsed) open vendor batches for this instance, oldest first. */
async function claim(ctx: Ctx): Promise<Row[]> {
  const v = blitzVendorBatches;
  const open = ctx.db.select({ id: v.id }).from(v)
    .where(and(inArray(v.status, ["submitting", "polling"]), or(isNull(v.claimedUntil), lt(v.claimedUntil, sql`now()`))))
    .orderBy(asc(v.createdAt)).limit(CLAIM_MAX).for("update", { skipLocked: true });
  return ctx.db.update(v)
    .set({ claimedBy: ctx.instanceId, claimedUntil: sql`now() + make_interval(secs => ${CLAIM_MS / 1000})` })
    .where(inArray(v.id, open))
    .returning();
}

async function step(ctx: Ctx, row: Row): Promise<void> {
  const job = await getJobRow(ctx, row.jobId);
  if (!job) {
    await endBatch(ctx, row);
    return;
  }
  const key = await ctx.services.keyCache.load(job.keyHash);
  const lane = key?.lanes[row.laneIndex];
  if (!key || !lane || lane.provider !== row.provider || !lane.credential || !vendorBatchApis[row.provider]) {
    // The key was revoked or rewired: its lane's credential is gone, so the batch cannot be read.
    await toLive(ctx, job, await vendorItems(ctx, job.id));
    await endBatch(ctx, row);
    return;
  }
  const api = vendorBatchApis[row.provider]!;
  const base = api.base(ctx);
  const apiKey = apiKeyOf(ctx, lane);
  if (!row.vendorBatchId) {
    if (job.status === "cancelled") return void (await endRow(ctx, row, job));
    // In index order: the vendor's results come back in the order they were sent.
    const items = await ctx.db.select({ idx: blitzJobItems.idx, request: blitzJobItems.request }).from(blitzJobItems)
      .where(and(eq(blitzJobItems.jobId, job.id), eq(blitzJobItems.status, "vendor"))).orderBy(asc(blitzJobItems.idx));
    const lines: { customId: string; body: Json }[] = [];
    const unbatchable: number[] = [];
    for (const i of items) {
      const body = i.request as Json;
      try {
        lines.push({ customId: String(i.idx), body: api.encode(body, lane.model ?? body.model, key) });
      } catch {
        // The vendor's protocol cannot express this item: it runs live, where it gets its answer or error.
        unbatchable.push(i.idx);
      }
    }
    if (unbatchable.length) await toLive(ctx, job, unbatchable);
    if (!lines.length) return void (await endRow(ctx, row, job));
    let id: string;
    try {
      id = await api.submit(base, apiKey, job.endpoint ?? JOB_ENDPOINT, lines);
    } catch (e) {
      // Refused for good (a bad key, a body the vendor rejects): the items run live instead.
      // A 429, a 5xx or a network failure is tried again at the next tick.
      if (e instanceof VendorBatchError && e.permanent) {
        ctx.log.warn({ vendorBatch: row.id, status: e.status }, "vendor batch refused at submit; its items run live");
        return void (await endRow(ctx, row, job));
      }
      throw e;
    }
    await ctx.db.update(blitzVendorBatches).set({ vendorBatchId: id, status: "polling", vendorStatus: "validating" }).where(eq(blitzVendorBatches.id, row.id));
    await ctx.db.update(blitzJobs).set({ status: "running" }).where(and(eq(blitzJobs.id, job.id), eq(blitzJobs.status, "queued")));
    return;
  }
  if (job.status === "cancelled" && row.vendorStatus !== "cancelling" && row.vendorStatus !== "cancelled") {
    await api.cancel(base, apiKey, row.vendorBatchId);
    await ctx.db.update(blitzVendorBatches).set({ vendorStatus: "cancelling" }).where(eq(blitzVendorBatches.id, row.id));
  }
  const state = await api.poll(base, apiKey, row.vendorBatchId);
  if (!state.ended) {
    if (state.status !== row.vendorStatus && row.vendorStatus !== "cancelling") {
      await ctx.db.update(blitzVendorBatches).set({ vendorStatus: state.status }).where(eq(blitzVendorBatches.id, row.id));
    }
    return;
  }
  await ctx.db.update(blitzVendorBatches).set({ vendorStatus: state.status }).where(eq(blitzVendorBatches.id, row.id));
  try {
    // Written LINES_PER_WRITE at a time as the results are read: a large results file is never held whole.
    let batch: ChatLine[] = [];
    for await (const line of api.results(base, apiKey, state)) {
      batch.push(line);
      if (batch.length < LINES_PER_WRITE) continue;
      await writeLines(ctx, job, key, lane, batch);
      batch = [];
    }
    if (batch.length) await writeLines(ctx, job, key, lane, batch);
  } catch (e) {
    // Results the gateway will never be able to read (refused for good, or a results URL it will
    // not follow): the items not yet written run live rather than wait forever. Anything else
    // (an outage, a broken connection): read again at the next tick, written lines skipped.
    if (!(e instanceof VendorBatchError && e.permanent)) throw e;
    ctx.log.warn({ vendorBatch: row.id, status: e.status, err: e.message }, "vendor batch results unreadable; its items run live");
  }
  await endRow(ctx, row, job);
}

/**
 * Ends the batch row and releases its hold on the key's budget (CONTRACT §9 "Batch work"): the
 * lines' real costs were added as they were written, so what the hold reserved goes back. Only
 * the update that ends the row releases (a poll repeated after a crash releases nothing twice); a
 * counter that is missing needs nothing: its rebuild reads the hold as ended.
 */
async function endBatch(ctx: Ctx, row: Row): Promise<void> {
  const [ended] = await ctx.db.update(blitzVendorBatches).set({ status: "ended", endedAt: new Date(), heldUsd: 0 })
    .where(and(eq(blitzVendorBatches.id, row.id), ne(blitzVendorBatches.status, "ended")))
    .returning({ id: blitzVendorBatches.id });
  if (!ended || row.heldUsd <= 0 || !row.routingKeyId || !row.heldMonth) return;
  await ctx.kv.adjust(counterKey(row.routingKeyId, row.heldMonth), -toNano(row.heldUsd), ttl())
    .catch((e: unknown) => ctx.log.warn({ vendorBatch: row.id, err: e instanceof Error ? e.message : String(e) }, "vendor batch hold not released: the key's counter stays that much higher (never lower) until it is rebuilt"));
}

/** Items still with the vendor, or failed there and not yet back in the live queue (a crash in between). */
const vendorItems = async (ctx: Ctx, jobId: string) =>
  (await ctx.db.select({ idx: blitzJobItems.idx }).from(blitzJobItems)
    .where(and(eq(blitzJobItems.jobId, jobId), inArray(blitzJobItems.status, ["vendor", "vendor_failed"])))).map((r) => r.idx);

/** Lines written per transaction: a 10,000-line batch is 20 of them, not 10,000. */
const LINES_PER_WRITE = 500;

/** Ends a vendor batch's part of the job: items no line named go live (or end cancelled), the row ends, the hold goes back. */
async function endRow(ctx: Ctx, row: Row, job: JobRow): Promise<void> {
  // Items the vendor never reported (a line missing from both files): never lost, run live.
  await toLive(ctx, job, await vendorItems(ctx, job.id));
  await endBatch(ctx, row);
  const ended = await endIfLast(ctx, job.id);
  if (ended) for (const f of ctx.services.blitzJobs.onEnded) f(ended);
}

function recordOf(job: JobRow, key: KeyContext, lane: ResolvedLane, idx: number, line: ChatLine, cost: { usd: number; source: string | null; estimated: boolean }) {
  const model = (line.body as { model?: string } | null)?.model ?? lane.model ?? null;
  const usage = line.outcome === "succeeded" ? line.usage : null;
  return {
    requestId: `${job.id}.${idx}`, accountId: key.accountId, routingKeyId: key.id, attempt: 1,
    recordKey: `${job.id}.${idx}.vendor`, endpoint: job.kind === "batch" ? "batch" : "blitz", laneIndex: lane.index, provider: lane.provider, model,
    status: line.status, outcome: line.outcome === "succeeded" ? "ok" : "error", errorCode: line.error?.code ?? null,
    promptTokens: usage?.prompt_tokens ?? 0, completionTokens: usage?.completion_tokens ?? 0, cachedTokens: usage?.cached_tokens ?? 0,
    costUsd: cost.usd, priceEstimated: cost.estimated, priceSource: cost.source, tags: job.tags ?? null,
  };
}

const FREE = { usd: 0, source: null, estimated: false };
const CANCELLED_RESULT = { error: { message: "The job was cancelled before the vendor ran this prompt; it was not charged.", code: "cancelled" }, mode: "batch" };

/**
 * Up to LINES_PER_WRITE lines, in one transaction: each answered line's item gets its result and
 * cost, each unanswered one becomes `vendor_failed` (endRow then puts it in the live queue, once:
 * the live runner's outcome is final) or, on a cancelled job, `cancelled`; every line written gets
 * its record. Only an item still `vendor` is written, so lines read twice (a crash before the batch
 * row ended) are written once. Then the key's month counter gains what the answered lines cost.
 */
async function writeLines(ctx: Ctx, job: JobRow, key: KeyContext, lane: ResolvedLane, batch: ChatLine[]): Promise<void> {
  // One line per item: a vendor that reports an id twice (in both files, or twice in one) gets its
  // first line written, never a second record or a second charge.
  const byIdx = new Map<number, ChatLine>();
  for (const line of batch) {
    const idx = Number(line.customId);
    if (Number.isInteger(idx) && !byIdx.has(idx)) byIdx.set(idx, line);
  }
  const priced = [...byIdx].map(([idx, line]) => {
    if (line.outcome !== "succeeded" || !line.usage) return { idx, line, cost: FREE };
    const model = (line.body as { model?: string } | null)?.model ?? lane.model ?? "";
    return { idx, line, cost: batchLinePrice(lane.provider, model, line.usage) };
  });
  const answered = priced.filter((x) => x.line.outcome === "succeeded");
  const cancelled = job.status === "cancelled";
  const unanswered = (toCancel: boolean) => priced.filter((x) => x.line.outcome !== "succeeded" && (cancelled || x.line.outcome === "canceled") === toCancel).map((x) => x.idx);
  const stillVendor = (idx: number[]) => and(eq(blitzJobItems.jobId, job.id), inArray(blitzJobItems.idx, idx), eq(blitzJobItems.status, "vendor"));
  const addedUsd = await ctx.db.transaction(async (tx) => {
    const written = new Set<number>();
    if (answered.length) {
      const values = sql.join(answered.map((x) => {
        const u = x.line.usage;
        const usage = u ? JSON.stringify({ prompt_tokens: u.prompt_tokens, completion_tokens: u.completion_tokens, total_tokens: u.prompt_tokens + u.completion_tokens }) : null;
        return sql`(${x.idx}::int, ${x.line.status}::int, ${JSON.stringify({ completion: x.line.body, mode: "batch" })}::jsonb, ${x.cost.usd}::float8, ${usage}::jsonb)`;
      }), sql`, `);
      const rows = rowsOf<{ idx: number }>(await tx.execute(sql`update ${blitzJobItems} as i
        set status = 'succeeded', http_status = v.s, result = v.r, cost_usd = v.c, usage = v.u
        from (values ${values}) as v(idx, s, r, c, u)
        where i.job_id = ${job.id} and i.idx = v.idx and i.status = 'vendor'
        returning i.idx`));
      for (const r of rows) written.add(Number(r.idx));
    }
    const toCancel = unanswered(true), toRetry = unanswered(false);
    if (toCancel.length) {
      for (const r of await tx.update(blitzJobItems).set({ status: "cancelled", httpStatus: 499, result: CANCELLED_RESULT }).where(stillVendor(toCancel)).returning({ idx: blitzJobItems.idx })) written.add(r.idx);
    }
    if (toRetry.length) {
      for (const r of await tx.update(blitzJobItems).set({ status: "vendor_failed" }).where(stillVendor(toRetry)).returning({ idx: blitzJobItems.idx })) written.add(r.idx);
    }
    const records = priced.filter((x) => written.has(x.idx)).map((x) => recordOf(job, key, lane, x.idx, x.line, x.cost));
    if (records.length) await tx.insert(usageRecords).values(records);
    return records.reduce((a, r) => a + r.costUsd, 0);
  });
  // The records are written: the month counter follows them. A counter that is missing (Redis
  // restarted empty) is rebuilt from Postgres, which has these records already: nothing is added on top.
  if (addedUsd > 0) await addSpend(ctx, key, addedUsd).catch(() => {});
}

/** Items back to the live queue (the runner runs them through the key's lanes at the live price). */
async function toLive(ctx: Ctx, job: JobRow, idx: number[]): Promise<void> {
  if (!idx.length) return;
  const moved = await ctx.db.update(blitzJobItems).set({ status: "queued" })
    .where(and(eq(blitzJobItems.jobId, job.id), inArray(blitzJobItems.idx, idx), inArray(blitzJobItems.status, ["vendor", "vendor_failed"])))
    .returning({ idx: blitzJobItems.idx });
  if (moved.length) await ctx.services.blitzJobs.queue.add(job.id, moved.map((m) => m.idx));
}

async function addSpend(ctx: Ctx, key: KeyContext, usd: number): Promise<void> {
  const month = monthKey();
  if ((await ctx.kv.adjust(counterKey(key.id, month), toNano(usd), ttl())) === null) await seed(ctx, key, month);
}
