// Runs one /blitz job item (CONTRACT §8), wherever the queue delivers it.
//
// - Each item is admitted like any request (runChat: budget, rate limits, concurrency cap). A 429
//   puts it back in the queue for later; so does a 402 while other items of the job run (their
//   reservations settle lower and give budget back); a 402 with none running stops the job
//   admitting (its remaining items end `not_run` with the budget's error) so a budget never runs
//   dry halfway through each item.
// - Idempotent by item: only a queued item is claimed; a final one is skipped.
// - Redelivery after its instance died (the item is still `running`): if its request is in the
//   dead instance's in-flight ledger, or has a usage record, it reached the money path and is
//   marked `interrupted` at that cost (the ledger's reconciler writes its record at the reserved
//   cost), so it is never billed twice; otherwise nothing of it ran and it is rerun, once.
import { eq } from "drizzle-orm";
import type { RelayDeps } from "../../relay/relay-deps.ts";
import type { GatewayError } from "../../errors.ts";
import type { ClientShape, Json } from "../../protocols/types.ts";
import { usageRecords } from "../../store/db/schema/index.ts";
import { fromNano, inflightKey } from "../../money/counters.ts";
import { runChat } from "../../relay/pipeline.ts";
import { cacheControlOf } from "../../cache/control.ts";
import type { ItemHandler, ItemRef, ItemVerdict } from "./queue.ts";
import { claimItem, endIfLast, finishItem, getJobRow, itemsInState, requeueItem, retakeItem, stopAdmitting, type ItemOutcome, type JobRow } from "./store.ts";

/** A job's items have no request headers of their own: the key's cache settings alone apply. */
const NO_CACHE_CONTROL = cacheControlOf(null);

/** How a prompt refused for budget waits for the job's prompts in flight to settle before it tries again. */
const BUDGET_WAIT_MS = 250;
/** Items refused for budget once with no other item of their job running (`<job>:<index>`). */
const refusedAlone = new Set<string>();
/** How a rate-limited item waits before its next try when the refusal named no time. */
const RETRY_DEFAULT_MS = 1000;
/**
 * How long a redelivered item looks for its earlier attempt's record before running again: past
 * the ledger's claim of stream entries a dead instance had read but not written (15 s idle), plus
 * a few usage-stream drains (every 200 ms).
 */
const STREAM_SETTLE_MS = 17_000;
const STREAM_LOOK_MS = 500;
/** How long a write of an item's fate (its outcome, its claim handed back) waits out a failing Postgres. */
const FINISH_RETRY_MS = 20_000;
/** The longest wait between tries of an item whose stores keep failing (it doubles from 1 s). */
const STORE_RETRY_MAX_MS = 30_000;

/** How far a try of an item got: claimed for this instance, then into the money path. */
interface Progress {
  claimed: boolean;
  sent: boolean;
}

export interface RunnerDeps {
  /** Redis mode: the connection to read the in-flight ledger with. */
  ledgerRedis: { hvals(key: string): Promise<string[]> } | null;
  /** Redis mode: another instance's standing in the ledger; null = one process. */
  instanceState: ((instance: string) => Promise<"alive" | "dead" | "gone">) | null;
  /** How long to wait before looking again at an item a live instance still runs. */
  recheckMs: number;
  /** A job's last item reached a final state (completed or failed). */
  onEnded(job: JobRow): void;
  /** A try of an item failed on a store; it is tried again after `retryAfterMs`. */
  onStoreError(e: unknown, item: ItemRef, retryAfterMs: number): void;
}

/** The client protocol of a job's items: a batch's endpoint, else chat (a /blitz job). */
export function shapeOfJob(job: Pick<JobRow, "endpoint">): ClientShape {
  return job.endpoint === "/v1/responses" ? "responses" : job.endpoint === "/v1/embeddings" ? "embeddings" : "chat";
}

export const itemRequestId = (jobId: string, idx: number, attempt: number) => `${jobId}.${idx}${attempt > 1 ? `.r${attempt}` : ""}`;

const errorResult = (message: string, code: string): Json => ({ error: { message, code } });

function retryAfterMs(err: GatewayError): number {
  const ms = Number(err.headers?.["retry-after-ms"]);
  if (Number.isFinite(ms) && ms > 0) return Math.min(ms, 60_000);
  const s = Number(err.headers?.["retry-after"]);
  return Number.isFinite(s) && s > 0 ? Math.min(s * 1000, 60_000) : RETRY_DEFAULT_MS;
}

/** A write the item's fate depends on, tried again (250 ms doubling to 4 s) for up to FINISH_RETRY_MS. */
async function patiently<T>(write: (again: boolean) => Promise<T>): Promise<T> {
  for (let waited = 0, wait = 250, again = false; ; again = true) {
    try {
      return await write(again);
    } catch (e) {
      if (waited >= FINISH_RETRY_MS) throw e;
      await Bun.sleep(wait);
      waited += wait;
      wait = Math.min(wait * 2, 4000);
    }
  }
}

export function itemRunner(ctx: RelayDeps, deps: RunnerDeps): ItemHandler {
  // The outcome is in hand (an answer, often paid for): a store failing under its write is waited
  // out for a while rather than losing it to a redelivery that could only say `interrupted`.
  const finish = (ref: ItemRef, o: ItemOutcome) =>
    patiently(async (again) => {
      const { changed, ended } = await finishItem(ctx, ref.jobId, ref.idx, o);
      // An earlier try's item write may have committed before the job's ending failed: end it now.
      const last = ended ?? (!changed && again ? await endIfLast(ctx, ref.jobId) : null);
      if (last) deps.onEnded(last);
    });

  /** What became of an attempt whose instance died: in flight (reserved), recorded, or never admitted. */
  async function priorAttempt(keyId: string, requestId: string): Promise<{ costUsd: number } | null> {
    // Records first: they carry the real cost (an answer that came back just before the death) or
    // the reconciler's reserved one; the ledger entry stands in for a record not yet written.
    const recorded = async () => {
      await ctx.services.usage.flush();
      const rows = await ctx.db.select({ cost: usageRecords.costUsd }).from(usageRecords).where(eq(usageRecords.requestId, requestId));
      return rows.length ? { costUsd: rows.reduce((a, r) => a + r.cost, 0) } : null;
    };
    const first = await recorded();
    if (first || !deps.ledgerRedis) return first;
    const needle = `"r":${JSON.stringify(requestId)}`;
    const entry = (await deps.ledgerRedis.hvals(inflightKey(keyId))).find((v) => v.includes(needle));
    if (entry) return { costUsd: fromNano(Number(entry.slice(entry.lastIndexOf("|") + 1)) || 0) };
    // A record the reconciler (or the dead instance, just before it died) sent may still be on its
    // way from the usage stream to Postgres, read by another instance's drain: look again over
    // several drains before concluding that nothing of the attempt ran. A rerun after a record
    // lands would bill the item twice.
    for (let waited = 0; waited < STREAM_SETTLE_MS; waited += STREAM_LOOK_MS) {
      await Bun.sleep(STREAM_LOOK_MS);
      const again = await recorded();
      if (again) return again;
    }
    return null;
  }

  /** Items this instance is running now (a redelivery of one of them is a duplicate). */
  const mine = new Set<string>();
  /** Items whose last try here failed on a store, by how many times in a row (their backoff). */
  const failures = new Map<string, number>();

  return async (ref) => {
    const id = `${ref.jobId}.${ref.idx}`;
    if (mine.has(id)) return;
    mine.add(id);
    const at: Progress = { claimed: false, sent: false };
    try {
      const v = await run(ref, at);
      failures.delete(id);
      return v;
    } catch (e) {
      // A store failed under the item (Postgres refusing connections, a query cut by a restart).
      // It is tried again later, so a passing outage never leaves an item queued with no one to
      // run it. Before the money path nothing of it ran: its claim is handed back. After it (its
      // outcome could not be written even after waiting) the later try is a redelivery: it finds
      // the attempt's record and ends the item `interrupted` at that cost, never sending it twice.
      if (failures.size > 10_000) failures.clear(); // items another instance went on to finish
      const n = (failures.get(id) ?? 0) + 1;
      failures.set(id, n);
      if (at.claimed && !at.sent) await patiently(() => requeueItem(ctx, ref.jobId, ref.idx)).catch(() => {});
      const retryAfterMs = Math.min(RETRY_DEFAULT_MS * 2 ** (n - 1), STORE_RETRY_MAX_MS);
      deps.onStoreError(e, ref, retryAfterMs);
      return { retryAfterMs };
    } finally {
      mine.delete(id);
    }
  };

  async function run(ref: ItemRef, at: Progress): Promise<ItemVerdict> {
    const job = await getJobRow(ctx, ref.jobId);
    if (!job) return; // expired and deleted
    const got = await claimItem(ctx, ref.jobId, ref.idx, ctx.instanceId);
    if (!got) return;
    at.claimed = got.claimed;
    let item = got.item;
    if (!got.claimed) {
      if (item.status !== "running") return; // already final: a duplicate delivery
      // The queue thought its runner stalled. While that instance is alive (a slow event loop, not
      // a death) it still owns the item; while it is dead but not yet reconciled, its in-flight
      // requests are not yet on record. Either way, look again later.
      const settled = !item.owner || item.owner === ctx.instanceId || !deps.instanceState || (await deps.instanceState(item.owner)) === "gone";
      if (!settled) return { retryAfterMs: deps.recheckMs };
      const prior = await priorAttempt(job.routingKeyId, itemRequestId(ref.jobId, ref.idx, item.attempts));
      if (prior || item.attempts >= 2) {
        return finish(ref, {
          status: "interrupted", httpStatus: 500, costUsd: prior?.costUsd ?? 0,
          result: errorResult("The gateway instance running this prompt stopped while it was in flight; it is charged at its reserved cost and was not retried (its answer may have been generated).", "interrupted"),
        });
      }
      const again = await retakeItem(ctx, ref.jobId, ref.idx, ctx.instanceId, item.attempts);
      if (!again) return; // another instance took it over first
      item = again;
      at.claimed = true;
    }
    if (job.status === "cancelled") {
      return finish(ref, { status: "cancelled", httpStatus: 499, result: errorResult("The job was cancelled before this prompt started; it was never sent.", "cancelled") });
    }
    if (job.stopReason) {
      return finish(ref, { status: "not_run", httpStatus: 402, result: errorResult("Not run: the routing key's monthly budget ran out during this job, which stopped admitting prompts.", job.stopReason) });
    }
    const key = await ctx.services.keyCache.load(job.keyHash);
    if (!key) {
      return finish(ref, { status: "failed", httpStatus: 401, result: errorResult("The job's routing key was revoked or its account removed; this prompt was not sent.", "invalid_api_key") });
    }
    const body = item.request as Json;
    const requestId = itemRequestId(ref.jobId, ref.idx, item.attempts);
    // A batch line calls its batch's endpoint (chat, responses or embeddings); a job prompt is a chat completion.
    const shape = shapeOfJob(job);
    const endpoint = job.kind === "batch" ? "batch" : "blitz";
    // The response cache, as for any request on a key with one: a hit is not admitted and costs $0.
    // The item's record: it counts in the metrics as one blitz (or batch) request, as a /blitz prompt does.
    const record = ctx.services.requestTracker.openPart(requestId, endpoint);
    const cached = key.cache && shape === "chat" ? await ctx.services.responseCache.lookupPrompt(key, body, NO_CACHE_CONTROL) : null;
    at.sent = true;
    if (cached?.a) {
      const completion = ctx.services.responseCache.promptHit(key, cached.a, body, record, job.tags ?? null);
      record.release();
      return finish(ref, { status: "succeeded", httpStatus: 200, result: { completion, mode: "live" }, usage: { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 }, costUsd: 0 });
    }
    const r = await runChat(ctx, key, body, {
      shape, stream: false, endpoint, signal: new AbortController().signal,
      requestId, bodyBytes: JSON.stringify(body).length, ownEntry: true, record, tags: job.tags ?? null,
    }).finally(() => record.release());
    if (r.ok && cached) await ctx.services.responseCache.keepPrompt(key, cached.k, body, r.body, { provider: r.provider, costUsd: r.costUsd, lowered: r.lowered, usage: r.usage });
    if (r.ok) {
      const u = r.usage;
      const usage = { prompt_tokens: u.prompt_tokens ?? 0, completion_tokens: u.completion_tokens ?? 0, total_tokens: (u.prompt_tokens ?? 0) + (u.completion_tokens ?? 0) };
      return finish(ref, { status: "succeeded", httpStatus: r.status, result: { completion: r.body, mode: "live" }, usage, costUsd: r.costUsd });
    }
    const err = r.error;
    // A rate limit, or the budget's store unreachable (Redis down or failing over): later, not failed.
    if ((err.status === 429 || err.code === "budget_unavailable") && r.costUsd === 0) {
      await requeueItem(ctx, ref.jobId, ref.idx);
      return { retryAfterMs: retryAfterMs(err) };
    }
    if (err.status === 402 && r.costUsd === 0) {
      // Refused while other prompts of the job run: their reservations (worst cases) hold budget
      // they will mostly give back when they settle. The prompt waits for them instead of
      // stopping the job with money left; once none runs, a refusal means the budget is spent.
      // A prompt that just ended may not have settled yet (settlements go out in batches, a few
      // ms later): with none running, the prompt tries once more after BUDGET_WAIT_MS.
      const seen = `${ref.jobId}:${ref.idx}`;
      const others = (await itemsInState(ctx, ref.jobId, "running")).some((i) => i !== ref.idx);
      if (others || !refusedAlone.has(seen)) {
        if (!others) {
          if (refusedAlone.size > 10_000) refusedAlone.clear();
          refusedAlone.add(seen);
        }
        await requeueItem(ctx, ref.jobId, ref.idx);
        return { retryAfterMs: BUDGET_WAIT_MS };
      }
      refusedAlone.delete(seen);
      await stopAdmitting(ctx, ref.jobId, err.code ?? "budget_exceeded");
      return finish(ref, { status: "not_run", httpStatus: 402, result: errorResult(err.message, err.code ?? "budget_exceeded") });
    }
    return finish(ref, { status: "failed", httpStatus: err.status, result: { ...errorResult(err.message, err.code ?? "upstream_error"), mode: "live" }, costUsd: r.costUsd });
  }
}
