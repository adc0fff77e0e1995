// POST /blitz (CONTRACT §6): up to 50 prompts through one routing key's lanes in one request,
// all at once. Each prompt is a full /v1/chat/completions request run by the pipeline's executor
// (lanes, fallback, translation, one usage record per attempt), so one failing prompt is one error
// entry and never fails the batch.
//
// Order of checks, as on inference: 405 (mount) → 401 → body 413/400 → no lanes 400 → budget 402.
// Budget: the batch's summed estimate is reserved with ONE reserve() call, all or nothing, before
// any upstream call; each prompt then settles its own slice with its real cost, releasing the
// unused part as soon as that prompt ends. Concurrency: a pool per batch and one instance-wide
// semaphore (pool.ts). A client that goes away aborts every prompt still running or queued.
import type { Elysia } from "elysia";
import type { Ctx } from "../context.ts";
import { asGatewayError, GatewayError } from "../errors.ts";
import { bearer, readJsonObject } from "../http/request.ts";
import { BLITZ, mount, type RequestContext } from "../http/route.ts";
import { monthKey } from "../lib/time.ts";
import type { Json } from "../protocols/types.ts";
import { resolveRoutingKey } from "./auth.ts";
import { BLITZ_INSTANCE_CAP, BLITZ_PER_REQUEST, runBounded, Semaphore } from "./blitz/pool.ts";
import { parseBlitzBody } from "./blitz/validate.ts";
import { fromNano, reserve, settle, toNano, type Reservation } from "./budget/counters.ts";
import type { KeyContext } from "./key-context.ts";
import { observerOf } from "./observer.ts";
import { estimateCostUsd, runChat } from "./pipeline.ts";
import { noProviders } from "./relay-errors.ts";
import type { UsageQueue } from "./usage-queue.ts";

export type BlitzResult =
  | { index: number; status: number; completion: Json }
  | { index: number; status: number; error: { message: string; code: string } };

export interface BlitzAnswer {
  object: "blitz.result";
  results: BlitzResult[];
  usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number };
}

/** The instance-wide prompt semaphore, `ctx.services.blitzSlots` (created on first use). */
export function blitzSlots(ctx: Ctx): Semaphore {
  let s = ctx.services.blitzSlots as Semaphore | undefined;
  if (!s) ctx.services.blitzSlots = s = new Semaphore(BLITZ_INSTANCE_CAP);
  return s;
}

export function blitzRoutes(ctx: Ctx, app: Elysia): void {
  mount(ctx, app, "/blitz", { POST: (rc) => handleBlitz(ctx, rc) }, BLITZ);
}

const authRequired = () =>
  new GatewayError(401, "No routing key was sent. /blitz needs a routing key (gw_…) in the Authorization header; create one with POST /v1/organizations/routing-keys.", { code: "auth_required" });

const batchOverBudget = (key: KeyContext, prompts: number, estimateUsd: number) =>
  new GatewayError(402, `This routing key's monthly budget of $${key.monthlyBudgetUsd} for ${monthKey()} cannot cover this batch (${prompts} prompts, estimated up to $${estimateUsd.toPrecision(3)}); nothing was sent upstream. Send fewer prompts or a lower max_tokens, or raise monthly_budget_usd with PATCH /v1/organizations/routing-keys.`, { code: "budget_exceeded" });

const cancelled = () => new GatewayError(499, "The client went away before this prompt was answered; it was cancelled.", { code: "cancelled" });

function errorEntry(index: number, err: GatewayError): BlitzResult {
  return { index, status: err.status, error: { message: err.message, code: err.code ?? "upstream_error" } };
}

/**
 * Splits one batch reservation into per-prompt slices that add up to exactly what was reserved,
 * so settling every slice with its real cost leaves the counter at the batch's real spend.
 */
function slices(res: Reservation, nanos: number[]): Reservation[] {
  const out = nanos.map((nano) => ({ ...res, nano: res.nano === 0 ? 0 : nano }));
  const sum = out.reduce((a, r) => a + r.nano, 0);
  if (out.length && sum !== res.nano) out[out.length - 1]!.nano += res.nano - sum;
  return out;
}

export async function handleBlitz(ctx: Ctx, rc: RequestContext): Promise<BlitzAnswer> {
  const { request, requestId } = rc;
  if (!bearer(request)) throw authRequired();
  const key = await resolveRoutingKey(ctx, request);
  const batch = parseBlitzBody(await readJsonObject(request, ctx.config.MAX_REQUEST_BYTES));
  (ctx.services.usageQueue as UsageQueue | undefined)?.touchKey(key.id);
  if (key.lanes.length === 0) throw noProviders();

  // The prompt's whole body size, as /v1/chat/completions measures it, so shared tools count.
  const bytes = batch.requests.map((r) => JSON.stringify(r).length);

  // Admission: one atomic reservation for the whole batch, or 402 before any upstream call.
  let reservation: Reservation | null = null;
  let nanos = batch.requests.map(() => 0);
  if (key.monthlyBudgetUsd !== null) {
    const est = batch.requests.map((r, i) => estimateCostUsd(ctx, key, r, bytes[i]));
    if (est.some((e) => e !== null)) {
      nanos = est.map((e) => toNano(e ?? 0));
      const total = nanos.reduce((a, n) => a + n, 0);
      reservation = await reserve(ctx, key, fromNano(total));
      if (!reservation) {
        observerOf(ctx).budgetRejected({ endpoint: "blitz" });
        throw batchOverBudget(key, batch.requests.length, fromNano(total));
      }
    }
  }
  // Unbudgeted keys still add their spend to the month counter that /v1/key reports.
  const shares = reservation
    ? slices(reservation, nanos)
    : batch.requests.map((): Reservation => ({ keyId: key.id, month: monthKey(), nano: 0 }));
  const settled = shares.map(() => false);
  const settleShare = (i: number, usd: number) => {
    if (settled[i]) return;
    settled[i] = true;
    if (usd === 0 && shares[i]!.nano === 0) return;
    settle(ctx, key, shares[i]!, usd).catch((e) =>
      ctx.log.error({ requestId, err: e instanceof Error ? e.message : String(e) }, "blitz budget settle failed"));
  };

  // One controller for the batch: the client going away cancels every prompt still running or queued.
  const batchAbort = new AbortController();
  const onGone = () => batchAbort.abort();
  if (request.signal.aborted) batchAbort.abort();
  else request.signal.addEventListener("abort", onGone, { once: true });

  try {
    const results = await runBounded(
      batch.requests,
      { limit: BLITZ_PER_REQUEST, shared: blitzSlots(ctx), signal: batchAbort.signal },
      async (body, index) => {
        let usd = 0;
        try {
          const r = await runChat(ctx, key, body, {
            shape: "chat", stream: false, signal: batchAbort.signal, endpoint: "blitz",
            requestId: `${requestId}.${index}`, budget: "prereserved", bodyBytes: bytes[index],
          });
          usd = r.costUsd;
          if (r.ok) return { entry: { index, status: r.status, completion: r.body } as BlitzResult, usage: r.usage };
          return { entry: errorEntry(index, r.error), usage: null };
        } catch (e) {
          return { entry: errorEntry(index, asGatewayError(e)), usage: null };
        } finally {
          settleShare(index, usd);
        }
      },
      (_body, index) => {
        settleShare(index, 0);
        return { entry: errorEntry(index, cancelled()), usage: null };
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
    request.signal.removeEventListener("abort", onGone);
    // Whatever path got here, no slice of the reservation stays held.
    for (let i = 0; i < shares.length; i++) settleShare(i, 0);
  }
}
