// POST /blitz (CONTRACT §6): up to 50 prompts through one routing key's lanes in one request,
// all at once. Each prompt is a full /v1/chat/completions request run by the pipeline's executor
// (lanes, fallback, translation, one usage record per attempt), so one failing prompt is one error
// entry and never fails the batch.
//
// Order of checks, as on inference: 405 (mount) → 401 → body 413/400 → no lanes 400 → budget 402
// → limits 429 (N requests and their tokens at once, all or nothing).
// Budget: the batch's summed worst case is reserved with ONE reservation, all or nothing, before
// any upstream call (MoneyCall.openBatch); each prompt then settles its own share with its real
// cost, releasing the unused part as soon as that prompt ends. Concurrency: a pool per batch and one instance-wide
// semaphore (pool.ts). A client that goes away aborts every prompt still running or queued.
import type { RelayDeps } from "../relay/relay-deps.ts";
import { asGatewayError, badRequest, GatewayError } from "../errors.ts";
import { bearer } from "../http/request.ts";
import { readJsonObject } from "../http/body.ts";
import { z } from "zod";
import type { RequestContext } from "../http/route.ts";
import { monthKey } from "../lib/time.ts";
import { batchParallelism, MoneyCall } from "../money/money.ts";
import { rateHeaders } from "../relay/limits/headers.ts";
import type { ChatRequest, Json, Usage } from "../protocols/types.ts";
import { resolveRoutingKey } from "../relay/auth.ts";
import { BLITZ_PER_REQUEST, runBounded } from "./pool.ts";
import { BLITZ_MAX_PROMPTS, parseBlitzBody } from "./validate.ts";
import { blitzEventStream } from "./events.ts";
import type { KeyContext } from "../relay/key-context.ts";
import { runChat } from "../relay/pipeline.ts";
import { lookupBatch, type BatchCache } from "./cached-prompts.ts";
import { cacheControlOf } from "../cache/control.ts";
import type { CachedAnswer } from "../cache/answer.ts";
import { noProviders } from "../relay/relay-errors.ts";
import { refusePromptTags, requestTags, tagsRequired } from "../relay/tags.ts";

export type BlitzResult =
  | { index: number; status: number; completion: Json }
  | { index: number; status: number; error: { message: string; code: string } };

export interface BlitzAnswer {
  object: "blitz.result";
  results: BlitzResult[];
  usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number };
}


/** The body parseBlitzBody (blitz/validate.ts) accepts, for the API reference. */
export const blitzBodyDoc = z.looseObject({
  model: z.string().min(1),
  prompts: z.array(z.union([z.string(), z.looseObject({ messages: z.array(z.looseObject({ role: z.string() })) })])).min(1).max(BLITZ_MAX_PROMPTS),
  stream: z.boolean().optional().meta({ description: "true (or `Accept: text/event-stream`): server-sent events, one `item` per prompt as it finishes, then `done`." }),
}).meta({ description: "Shared chat parameters (temperature, max_tokens, tools…) apply to every prompt." });

const authRequired = () =>
  new GatewayError(401, "No routing key was sent. /blitz needs a routing key (gw_…) in the Authorization header; create one with POST /v1/organizations/routing-keys.", { code: "auth_required" });

const batchOverBudget = (key: KeyContext, prompts: number, estimateUsd: number) =>
  new GatewayError(402, `This routing key's monthly budget of $${key.monthlyBudgetUsd} for ${monthKey()} cannot cover this batch (${prompts} prompts, estimated up to $${estimateUsd.toPrecision(3)}); nothing was sent upstream. Send fewer prompts or a lower max_tokens, or raise monthly_budget_usd with PATCH /v1/organizations/routing-keys.`, { code: "budget_exceeded" });

const cancelled = () => new GatewayError(499, "The client went away before this prompt was answered; it was cancelled.", { code: "cancelled" });

function errorEntry(index: number, err: GatewayError): BlitzResult {
  return { index, status: err.status, error: { message: err.message, code: err.code ?? "upstream_error" } };
}

export async function handleBlitz(ctx: RelayDeps, rc: RequestContext): Promise<BlitzAnswer | Response> {
  const { request, requestId } = rc;
  if (!bearer(request)) throw authRequired();
  const key = await resolveRoutingKey(ctx, request);
  const raw = (await readJsonObject(request, ctx.config.MAX_REQUEST_BYTES, badRequest)).value;
  // CONTRACT §9: the batch's tags (header, else the shared metadata.tags, taken off before the prompts are built) on every prompt's records.
  const tags = requestTags(request.headers, raw as Json);
  const batch = parseBlitzBody(raw);
  refusePromptTags(batch.requests);
  if (tags === null && key.requireTags) throw tagsRequired();
  ctx.services.usageQueue.touchKey(key.id);
  if (key.lanes.length === 0) throw noProviders();

  // The prompt's whole body size, as /v1/chat/completions measures it, so shared tools count.
  const bytes = batch.requests.map((r) => JSON.stringify(r).length);

  // The response cache first (docs/caching.md "/blitz"): a prompt answered from it is not admitted.
  const cache = key.cache ? await lookupBatch(ctx.services.responseCache, key, batch.requests, cacheControlOf(request.headers.get("cache-control"))) : null;
  const admit = batch.requests.map((_, i) => i).filter((i) => !cache?.entries[i]?.a);
  // Admission: one atomic reservation for the whole batch, or 402 before any upstream call.
  const admitted = admit.length === 0 ? [] : await MoneyCall.openBatch(ctx, key, requestId, "blitz", admit.map((i) => batch.requests[i]!), admit.map((i) => bytes[i]!), admit, tags);
  if (!Array.isArray(admitted)) {
    rc.access.budgetRefused = "blitz";
    throw batchOverBudget(key, admit.length, admitted.refusedUsd);
  }
  const calls: Array<MoneyCall | undefined> = [];
  admit.forEach((i, j) => (calls[i] = admitted[j]));
  const rate = admitted[0]?.rate;
  if (rate) rc.headers = rateHeaders(rate.limits, rate.verdict);

  // One controller for the batch: the client going away cancels every prompt still running or queued.
  const batchAbort = new AbortController();
  const onGone = () => batchAbort.abort();
  if (request.signal.aborted) batchAbort.abort();
  else request.signal.addEventListener("abort", onGone, { once: true });
  const run = (onEntry?: (r: PromptOutcome) => void) =>
    runBatch(ctx, key, batch.requests, { calls, admitted, cache, bytes, requestId, signal: batchAbort.signal, onEntry, tags })
      .finally(() => request.signal.removeEventListener("abort", onGone));

  const streamed = batch.stream || (request.headers.get("accept") ?? "").includes("text/event-stream");
  if (!streamed) return run();
  return blitzEventStream(ctx.config.KEEPALIVE_MS, onGone, (sink) =>
    run((r) => sink.item({ ...r.entry, usage: r.usage ? usageOf(r.usage) : null })).then(summaryOf));
}

interface PromptOutcome {
  entry: BlitzResult;
  usage: Usage | null;
}

const usageOf = (u: Usage) => {
  const prompt = u.prompt_tokens ?? 0;
  const completion = u.completion_tokens ?? 0;
  return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
};

/** The `done` event: counts by outcome and the summed usage (the results went out as items). */
function summaryOf(a: BlitzAnswer) {
  const cancelledCount = a.results.filter((r) => "error" in r && r.error.code === "cancelled").length;
  const succeeded = a.results.filter((r) => "completion" in r).length;
  return { object: "blitz.summary", prompts: a.results.length, succeeded, failed: a.results.length - succeeded - cancelledCount, cancelled: cancelledCount, usage: a.usage };
}

/**
 * Runs an admitted batch: each prompt through runChat with its share of the reservation, at most
 * the leases the batch took at a time. `onEntry` hears each prompt's outcome as it finishes
 * (cancelled ones included). Every share is settled by the time this resolves.
 */
async function runBatch(
  ctx: RelayDeps, key: KeyContext, requests: ChatRequest[],
  o: {
    /** Each prompt's money by index; none for a prompt answered from the cache. */
    calls: Array<MoneyCall | undefined>;
    admitted: MoneyCall[];
    cache: BatchCache | null;
    bytes: number[]; requestId: string; signal: AbortSignal; onEntry?: (r: PromptOutcome) => void;
    /** The batch's tags (CONTRACT §9), on a cached prompt's record too. */
    tags: string[] | null;
  },
): Promise<BlitzAnswer> {
  const { calls } = o;
  const report = (r: PromptOutcome) => {
    o.onEntry?.(r);
    return r;
  };
  try {
    const results = await runBounded(
      requests,
      // A key with a concurrency cap runs at most the leases the batch took at a time.
      { limit: batchParallelism(o.admitted, BLITZ_PER_REQUEST), shared: ctx.services.blitzSlots, signal: o.signal },
      async (body, index): Promise<PromptOutcome> => {
        const requestId = `${o.requestId}.${index}`;
        // The prompt's own record: it counts in the metrics as one blitz request (released below).
        const record = ctx.services.requestTracker.openPart(requestId, "blitz");
        const hit = (a: CachedAnswer) => report({ entry: { index, status: 200, completion: ctx.services.responseCache.promptHit(key, a, body, record, o.tags) }, usage: null });
        const e = o.cache?.entries[index] ?? null;
        if (e?.a) {
          try {
            return hit(e.a);
          } finally {
            record.release();
          }
        }
        // A prompt the batch already sent upstream waits for that answer, and goes itself without one.
        const lead = e ? await o.cache!.lead(e.k) : null;
        try {
          if (lead?.answer) {
            calls[index]!.settle(); // nothing was spent: its share of the reservation goes back
            return hit(lead.answer);
          }
          const r = await runChat(ctx, key, body, {
            shape: "chat", stream: false, signal: o.signal, endpoint: "blitz",
            requestId, money: calls[index], bodyBytes: o.bytes[index], record,
          });
          if (r.ok) {
            if (e) lead?.done(await ctx.services.responseCache.keepPrompt(key, e.k, body, r.body, { provider: r.provider, costUsd: r.costUsd, lowered: r.lowered, usage: r.usage }));
            return report({ entry: { index, status: r.status, completion: r.body }, usage: r.usage });
          }
          return report({ entry: errorEntry(index, r.error), usage: null });
        } catch (err) {
          return report({ entry: errorEntry(index, asGatewayError(err)), usage: null });
        } finally {
          lead?.done(null);
          calls[index]?.settle();
          record.release();
        }
      },
      (_body, index) => {
        calls[index]?.settle();
        return report({ entry: errorEntry(index, cancelled()), usage: null });
      },
    );
    let prompt = 0;
    let completion = 0;
    for (const r of results) {
      prompt += r.usage?.prompt_tokens ?? 0;
      completion += r.usage?.completion_tokens ?? 0;
    }
    return {
      object: "blitz.result",
      results: results.map((r) => r.entry),
      usage: { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion },
    };
  } finally {
    // Whatever path got here, no slice of the reservation stays held.
    for (const c of o.admitted) c.settle();
  }
}
