// The money of an upstream call, owned in one place (CONTRACT §7): reserve → record → settle.
// Every caller that sends something upstream on a routing key's behalf (the relay's attempts, the
// classifier, transcriptions, each /blitz prompt) opens a MoneyCall, records each attempt through
// it, and settles it once. So each guarantee is written once, here:
//   - the worst case is reserved before forwarding, or what remains with a lowered output limit,
//     or 402 (estimate.ts, counters.ts);
//   - every attempt becomes exactly one usage record, priced from the catalog, and a model the
//     catalog does not know is priced at the operator's fallback on keys with a budget (the
//     record's price_estimated says so);
//   - the settlement replaces the reservation with the real cost exactly once (settle-batch.ts);
//   - the key's rate limits are admitted in the same store call as the budget (after it: 402
//     outranks 429), and the settlement gives back unused tokens and the concurrency lease
//     (relay/limits/rate-limits.ts);
//   - a hot budgeted key's requests are admitted from this instance's budget lease when their
//     worst case fits it, without a round trip (leases.ts).
import { GatewayError } from "../errors.ts";
import { monthKey } from "../lib/time.ts";
import type { Json, Usage } from "../protocols/types.ts";
import type { ProviderAdapter } from "../providers/types.ts";
import type { KeyContext } from "../relay/key-context.ts";
import { priceUsd, type PriceSource } from "./pricing.ts";
import { budgetRefusal } from "./refusal.ts";
import type { UsageRow } from "../relay/usage-queue.ts";
import { fromNano, reserve, toNano, type Reservation } from "./counters.ts";
import { estimateRequest, fallbackPrices, outputLimitFor, type Estimate } from "./estimate.ts";
import type { FactsJson, Ledger } from "./ledger/index.ts";
import { leasedFacts, leaseFacts } from "./ledger/facts.ts";
import { RECOVERY_BARRIER_MS } from "./ledger/epoch.ts";
import type { BudgetLeases, LeaseHold } from "./leases.ts";
import { tokenAsk, type RateHold } from "../relay/limits/rate-limits.ts";
import type { LimitCall } from "../store/kv/types.ts";
import type { MoneyDeps } from "./money-deps.ts";

export type { MoneyDeps } from "./money-deps.ts";

/** One attempt as the money owner records it (the usage record without what it derives). */
export interface AttemptRecord {
  adapter: Pick<ProviderAdapter, "id" | "pricingId" | "seat">;
  /** The provider written on the record (a lane's provider id; the adapter id when there is no lane). */
  provider: string;
  laneIndex: number | null;
  model: string | null;
  status: number;
  outcome: "ok" | "error" | "aborted" | "broken" | "interrupted";
  errorCode: string | null;
  usage: Usage | null;
  latencyMs: number;
  ttfbMs: number | null;
  /** The request fields this attempt's lane got adapted (CONTRACT §9), null when none. */
  adapted?: string | null;
  /** Session affinity for this attempt (CONTRACT §9): followed, moved or new; null without a session. */
  affinity?: string | null;
}

/**
 * Budgeted inference while the budget store is unreachable or frozen (CONTRACT §7): a fast 503,
 * never a hang and never an unchecked request.
 */
export const budgetUnavailable = () =>
  new GatewayError(503, "The budget store is unreachable, so this budgeted key's spend cannot be checked; nothing was sent upstream. Retry in a moment.", {
    code: "budget_unavailable", type: "server_error", headers: { "retry-after": "1" },
  });

/**
 * Admits (budget and limits in one store call), turning a store failure (timeout, connection down)
 * into 503 budget_unavailable, or into null when only limits were asked (the caller then admits
 * against this instance's share: rate-limits.ts).
 */
async function admitOr503(deps: MoneyDeps, key: KeyContext, usd: number | null, minUsd: number | null, ledger: Ledger | null, uid: string, facts: FactsJson, limits?: LimitCall): Promise<Reservation | null | "unreachable"> {
  try {
    // After Redis lost its state, a budgeted admission waits for the recovery barrier (ledger/epoch.ts);
    // one that would wait longer than GATE_WAIT_MS answers 503 budget_unavailable instead.
    if (ledger?.gate && usd !== null && key.monthlyBudgetUsd !== null) await within(ledger.gate, GATE_WAIT_MS);
    const entry = ledger ? ledger.admission(key.id, uid, facts) : undefined;
    const r = await reserve(deps, key, usd, minUsd, entry, ledger ? () => ledger.checkEpoch() : undefined, limits);
    if (r && ledger && !r.limits?.refused) ledger.admitted(key, uid, r.month, facts, r.nano);
    return r;
  } catch (e) {
    deps.log.warn({ keyId: key.id, err: e instanceof Error ? e.message : String(e) }, "budget store unavailable");
    if (usd === null || key.monthlyBudgetUsd === null) return "unreachable";
    throw budgetUnavailable();
  }
}

/**
 * A hold on the key's budget that outlives any request and any instance (a vendor batch's worst
 * case while the vendor works: blitz/batches/admission.ts holds it, blitz/vendor/poller.ts releases it). Reserved on the month counter as an
 * admission is, atomically across instances, but without an in-flight entry: the hold is not this
 * instance's to lose when it dies. Its owner keeps it in Postgres, where a rebuilt counter finds it
 * (store/spend-counters.ts), and releases it. null: it does not fit what is left; 503 when the
 * budget store is unreachable.
 */
export async function holdBudget(deps: MoneyDeps, key: KeyContext, usd: number): Promise<Reservation | null> {
  const ledger = deps.services.ledger;
  try {
    if (ledger?.gate) await within(ledger.gate, GATE_WAIT_MS);
    return await reserve(deps, key, usd, usd, undefined, ledger ? () => ledger.checkEpoch() : undefined);
  } catch (e) {
    deps.log.warn({ keyId: key.id, err: e instanceof Error ? e.message : String(e) }, "budget store unavailable");
    throw budgetUnavailable();
  }
}

/** Longest a budgeted admission waits for the ledger's recovery: a few barriers (RECOVERY_BARRIER_MS). */
const GATE_WAIT_MS = 3 * RECOVERY_BARRIER_MS;

function within(p: Promise<void>, ms: number): Promise<void> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<void>((_, reject) => { timer = setTimeout(() => reject(new Error(`budget store recovery still running after ${ms} ms`)), ms); });
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}

export interface OpenOptions {
  requestId: string | null;
  endpoint: string;
  /** The model asked for (written on the record of a request its instance could not finish). */
  model?: string | null;
  /**
   * Admitted with its own in-flight entry and reservation, never from a budget lease: a /blitz job
   * item, whose rerun after a crash asks the ledger about that item by its request id.
   */
  ownEntry?: boolean;
  /** The request's tags (CONTRACT §9, relay/tags.ts), written on each of its records; null or absent when untagged. */
  tags?: string[] | null;
}


/** The request's tags in its in-flight entry's facts, so the record of a request its instance could not finish carries them too. */
const tagFacts = (opts: OpenOptions): string => (opts.tags ? `,"tg":${JSON.stringify(opts.tags)}` : "");

// The gateway's own id of a money call: unique per instance start and call. The ledger and the
// records' dedupe key use it, never the request id, which a client may choose and reuse.
let seq = 0;
const newUid = (deps: MoneyDeps) => `${deps.instanceId}.${(++seq).toString(36)}`;

export class MoneyCall {
  /** Cost that counts toward the key's budget (seat traffic excluded while budget_excludes_seats). */
  countedUsd = 0;
  /**
   * What the call's usage records hold in all (seat traffic included): the `cost` and
   * `x-gateway-cost-usd` of its answer (CONTRACT §9).
   */
  recordedUsd = 0;
  /** What was reserved against the budget at admission (0 on a key without one). */
  readonly reservedUsd: number;
  /** The output limit the request must be sent with (lowered near the end of the budget), or null. */
  outputLimit: number | null = null;
  /** The call's hold on the key's rate limits, given back at settlement. */
  rate: RateHold | null = null;
  private settled = false;
  private attempts = 0;
  /** Tokens the attempts really used (null once an answer came without a usage count). */
  private tokensUsed: number | null = 0;
  /** The ledger entry's id and the prefix of every record key of this call. */
  readonly uid: string;
  /** The budget lease this call was admitted from (it has no in-flight entry of its own). */
  private lease: LeaseHold | null = null;

  /** `inLedger`: the request has an in-flight ledger entry that the settlement removes. */
  constructor(readonly deps: MoneyDeps, readonly key: KeyContext, readonly opts: OpenOptions, private reservation: Reservation | null, private inLedger = false, uid?: string) {
    this.uid = uid ?? newUid(deps);
    this.reservedUsd = reservation ? fromNano(reservation.nano) : 0;
  }

  /**
   * A call that costs nothing and is recorded nowhere (a token count on a key without limits): no
   * reservation, no in-flight entry; its settlement does nothing.
   */
  static free(deps: MoneyDeps, key: KeyContext, opts: OpenOptions): MoneyCall {
    return new MoneyCall(deps, key, opts, null);
  }

  /** A call on a key without a budget: no reservation, but an in-flight entry (batched per turn) in Redis mode. */
  private static unbudgeted(deps: MoneyDeps, key: KeyContext, opts: OpenOptions, nano = 0): MoneyCall {
    const ledger = deps.services.ledger;
    if (!ledger) return new MoneyCall(deps, key, opts, null);
    const month = monthKey();
    const uid = newUid(deps);
    ledger.enter(key, uid, month, ledger.facts(key, opts.endpoint, opts.model ?? null, month, opts.requestId, tagFacts(opts)), nano);
    return new MoneyCall(deps, key, opts, { keyId: key.id, month, nano }, true, uid);
  }

  /**
   * Admits one request: reserves its worst case (or what remains, lowering its output limit) on a
   * key with a budget, and takes its requests, tokens and lease on a key with limits; throws 402
   * budget_exceeded when not even the prompt and a useful answer fit, 429 over a limit.
   */
  static async open(deps: MoneyDeps, key: KeyContext, opts: OpenOptions, request: Json, bytes?: number): Promise<MoneyCall> {
    const o = { ...opts, model: typeof request.model === "string" ? request.model : null };
    const ask = key.limits ? { requests: 1, tokens: tokenAsk(key, request, bytes ?? JSON.stringify(request).length, opts.endpoint === "embeddings") } : null;
    if (key.monthlyBudgetUsd === null) return ask ? MoneyCall.reserveFor(deps, key, o, null, ask) : MoneyCall.unbudgeted(deps, key, o);
    return MoneyCall.reserveFor(deps, key, o, estimateRequest(deps, key, request, bytes), ask);
  }

  /**
   * Admits a call whose worst case the caller computed (null: nothing it may use counts toward the
   * budget) and, on a key with limits, what it asks of them.
   */
  static async reserveFor(deps: MoneyDeps, key: KeyContext, opts: OpenOptions, est: Pick<Estimate, "usd" | "minUsd"> & Partial<Estimate> | null, ask: { requests: number; tokens: number } | null = null): Promise<MoneyCall> {
    const budgeted = key.monthlyBudgetUsd !== null && est !== null;
    if (!budgeted && !(ask && key.limits)) return MoneyCall.unbudgeted(deps, key, opts);
    const ledger = deps.services.ledger;
    const limits = deps.services.rateLimits;
    const uid = newUid(deps);
    const lc = ask && key.limits ? limits.call(key, { ...ask, entry: uid }) : undefined;
    let slice: { requests: number; tokens: number } | undefined;
    const plain = lc?.ask;
    if (lc && !budgeted) {
      // Without a budget to check first: a key over its request limit is refused, and a hot key's
      // request served from this instance's slice, without a round trip; else a slice may be taken.
      limits.checkKnownOver(key);
      const served = limits.fromSlice(key, lc);
      if (served) {
        const call = MoneyCall.unbudgeted(deps, key, opts);
        call.rate = served;
        return call;
      }
      slice = limits.widen(key, lc);
    }
    const leases = deps.services.leases;
    if (budgeted && !lc && leases && ledger && !opts.ownEntry) {
      const leased = await MoneyCall.fromLease(deps, key, opts, est, leases, ledger);
      if (leased) return leased;
    }
    const facts = ledger ? ledger.facts(key, opts.endpoint, opts.model ?? null, monthKey(), opts.requestId, tagFacts(opts)) : ("" as FactsJson);
    let r = await admitOr503(deps, key, budgeted ? est.usd : null, budgeted ? est.minUsd : null, ledger, uid, facts, lc);
    if (lc && plain && lc.ask !== plain && (r === "unreachable" || r?.limits?.refused)) {
      // The slice did not fit (or Redis is gone): the request alone.
      lc.ask = plain;
      lc.aheadMs = 0;
      slice = undefined;
      if (r !== "unreachable") r = await admitOr503(deps, key, null, null, ledger, uid, facts, lc);
    }
    if (r === "unreachable") {
      const hold = limits.admitLocally(key, lc!);
      const call = MoneyCall.unbudgeted(deps, key, opts);
      call.rate = hold;
      return call;
    }
    if (!r) {
      deps.services.usageQueue.refusal(key.accountId, key.id, "budget");
      if (budgeted) await deps.services.budgetAlerts?.refused(key);
      throw await budgetRefusal(deps, key, budgeted ? est.minUsd : null);
    }
    if (budgeted && r.total !== undefined) leases?.seen(key, r.total);
    const rate = lc ? limits.admitted(key, lc, r.limits!, false, slice) : null;
    const call = new MoneyCall(deps, key, opts, r, Boolean(ledger), uid);
    call.rate = rate;
    if (budgeted && est.prices) call.outputLimit = outputLimitFor(est as Estimate, fromNano(r.nano));
    return call;
  }

  /**
   * Admits a request of a hot budgeted key from this instance's lease, taking one (a slice of the
   * budget reserved with this request's admission) when the key is hot and has room; null when
   * the request is to be admitted on its own.
   */
  private static async fromLease(deps: MoneyDeps, key: KeyContext, opts: OpenOptions, est: Pick<Estimate, "usd">, leases: BudgetLeases, ledger: Ledger): Promise<MoneyCall | null> {
    const nano = toNano(est.usd);
    let held: LeaseHold | null = null;
    // A burst: requests wait for the lease another one is taking, and take the next one when it
    // is used up, a few times at most before each goes to Redis on its own.
    for (let tries = 0; !held && tries < 4; tries++) {
      held = leases.admit(key, nano);
      if (held) break;
      const taking = leases.pending(key.id);
      if (taking) {
        await taking;
        continue;
      }
      const size = leases.size(key, nano);
      if (!size) return null;
      const uid = newUid(deps);
      const facts = leaseFacts(ledger.facts(key, opts.endpoint, opts.model ?? null, monthKey(), null));
      // All or nothing: a slice that no longer fits leaves the request to its own admission.
      const take = admitOr503(deps, key, fromNano(size), fromNano(size), ledger, uid, facts);
      leases.takes(key.id, take);
      const r = await take;
      if (!r || r === "unreachable") return null;
      if (r.total !== undefined) leases.seen(key, r.total);
      held = leases.opened(key, uid, r.month, r.nano, nano);
    }
    if (!held) return null;
    // Its own in-flight entry, naming the lease and its worst case, on its way to Redis before the
    // upstream call (beforeUpstream) without waiting for it: a crash leaves it one `interrupted`
    // record at that worst case, and the rest of the lease goes back (reconcile.ts).
    const month = held.lease.month;
    const uid = newUid(deps);
    ledger.enterLeased(key, uid, month, ledger.facts(key, opts.endpoint, opts.model ?? null, month, opts.requestId, leasedFacts(held.lease.id, nano) + tagFacts(opts)));
    const call = new MoneyCall(deps, key, opts, { keyId: key.id, month, nano }, false, uid);
    call.lease = held;
    return call;
  }

  /**
   * Admits a batch all or nothing (/blitz): one reservation of every request's worst case, split
   * into one MoneyCall per request whose shares add up to exactly what was reserved, and on a key
   * with limits N requests, their tokens and min(N, cap) leases at once (the batch runs at most
   * that many prompts at a time; its last prompt gives the leases back). Returns the refused
   * amount when the batch does not fit the budget (nothing was reserved); throws 429 over a limit.
   * `indexes`: each request's index in its batch, when only some of the batch is admitted (the
   * others answered from the response cache); request i's id is `<requestId>.<its index>`.
   */
  static async openBatch(deps: MoneyDeps, key: KeyContext, requestId: string, endpoint: string, requests: Json[], bytes: number[], indexes?: number[], tags: string[] | null = null): Promise<MoneyCall[] | { refusedUsd: number }> {
    const model = (r: Json) => (typeof r.model === "string" ? r.model : null);
    const ids = (i: number): OpenOptions => ({ requestId: `${requestId}.${indexes?.[i] ?? i}`, endpoint, model: model(requests[i]!), tags });
    const est = key.monthlyBudgetUsd === null ? [] : requests.map((r, i) => estimateRequest(deps, key, r, bytes[i]));
    const budgeted = est.some((e) => e !== null);
    const tokens = key.limits ? requests.map((r, i) => tokenAsk(key, r, bytes[i]!)) : [];
    if (!budgeted && !key.limits) return requests.map((_, i) => MoneyCall.unbudgeted(deps, key, ids(i)));
    const nanos = requests.map((_, i) => toNano(est[i]?.usd ?? 0));
    const total = nanos.reduce((a, n) => a + n, 0);
    const ledger = deps.services.ledger;
    const limits = deps.services.rateLimits;
    const batchUid = newUid(deps);
    const lc = key.limits
      ? limits.call(key, { requests: requests.length, tokens: tokens.reduce((a, t) => a + t, 0), entry: batchUid }, Math.min(requests.length, key.limits.concurrency ?? requests.length))
      : undefined;
    if (lc && !budgeted) limits.checkKnownOver(key);
    const facts = ledger ? ledger.facts(key, endpoint, model(requests[0] ?? {}), monthKey(), requestId) : ("" as FactsJson);
    const r = await admitOr503(deps, key, budgeted ? fromNano(total) : null, budgeted ? fromNano(total) : null, ledger, batchUid, facts, lc);
    if (r === "unreachable") {
      const hold = limits.admitLocally(key, lc!);
      return requests.map((_, i) => MoneyCall.unbudgeted(deps, key, ids(i))).map(batchShare(hold, tokens));
    }
    if (!r) {
      deps.services.usageQueue.refusal(key.accountId, key.id, "budget");
      if (budgeted) await deps.services.budgetAlerts?.refused(key);
      return { refusedUsd: fromNano(total) };
    }
    const hold = lc ? limits.admitted(key, lc, r.limits!) : null;
    const shares = nanos.map((nano) => ({ ...r, nano }));
    const sum = shares.reduce((a, s) => a + s.nano, 0);
    if (shares.length && sum !== r.nano) shares[shares.length - 1]!.nano += r.nano - sum;
    let calls: MoneyCall[];
    if (!ledger) calls = shares.map((s, i) => new MoneyCall(deps, key, ids(i), s));
    else {
      // The batch's one entry becomes one entry per prompt (its share), in the same turn.
      calls = shares.map((s, i) => {
        const uid = newUid(deps);
        ledger.enter(key, uid, s.month, ledger.facts(key, endpoint, ids(i).model ?? null, s.month, ids(i).requestId, tagFacts(ids(i))), s.nano);
        return new MoneyCall(deps, key, ids(i), s, true, uid);
      });
      ledger.settle(key, batchUid, r.month, r.nano, r.nano);
    }
    return hold ? calls.map(batchShare(hold, tokens)) : calls;
  }

  /** The price of one attempt's usage, exactly as record() will write it. */
  private price(adapter: AttemptRecord["adapter"], model: string | null, usage: Usage | null): { usd: number; estimated: boolean; source: PriceSource | null } {
    if (!usage || model === null) return { usd: 0, estimated: false, source: null };
    const fallback = this.key.monthlyBudgetUsd !== null ? fallbackPrices(this.deps) : null;
    return priceUsd(adapter.pricingId ?? adapter.id, model, usage, fallback, this.deps.services.prices?.get(adapter.id, model) ?? null);
  }

  /**
   * The call's cost once an attempt with this usage is recorded: what its answer's usage carries
   * as `cost` before the attempt ends (a stream's last usage event goes out first). The same
   * arithmetic as record(), so the answer and the records agree.
   */
  quote(adapter: AttemptRecord["adapter"], model: string | null, usage: Usage | null): number {
    return this.recordedUsd + this.price(adapter, model, usage).usd;
  }

  /**
   * Called just before a request goes upstream: a lease-admitted call's in-flight entry, batched
   * to the end of its turn, is sent now if it is still waiting, so it never trails the call.
   */
  beforeUpstream(): void {
    if (this.lease) this.deps.services.ledger?.sendEntries();
  }

  /** Records one attempt: prices it, queues its usage record, and counts its cost. Returns the cost. */
  record(a: AttemptRecord): number {
    const { key } = this;
    const price = this.price(a.adapter, a.model, a.usage);
    this.recordedUsd += price.usd;
    if (!(a.adapter.seat && key.budgetExcludesSeats)) this.countedUsd += price.usd;
    if (this.tokensUsed !== null) {
      if (a.usage) this.tokensUsed += (a.usage.prompt_tokens ?? 0) + (a.usage.completion_tokens ?? 0);
      else if (a.outcome === "ok" || a.outcome === "broken") this.tokensUsed = null;
    }
    const row: UsageRow = {
      requestId: this.opts.requestId,
      attempt: ++this.attempts,
      recordKey: `${this.uid}.${this.attempts}`,
      accountId: key.accountId,
      routingKeyId: key.id,
      endpoint: this.opts.endpoint,
      laneIndex: a.laneIndex,
      provider: a.provider,
      model: a.model,
      status: a.status,
      outcome: a.outcome,
      errorCode: a.errorCode,
      promptTokens: a.usage?.prompt_tokens ?? 0,
      completionTokens: a.usage?.completion_tokens ?? 0,
      cachedTokens: a.usage?.cached_tokens ?? 0,
      cacheWriteTokens: a.usage?.cache_write_tokens ?? 0,
      costUsd: price.usd,
      priceEstimated: price.estimated,
      priceSource: price.source,
      latencyMs: a.latencyMs,
      ttfbMs: a.ttfbMs,
      seat: a.adapter.seat,
      adapted: a.adapted ?? null,
      affinity: a.affinity ?? null,
      tags: this.opts.tags ?? null,
      createdAt: new Date().toISOString(),
    };
    // Redis mode: into the usage stream with this turn's ledger writes; embedded: the usage queue.
    const ledger = this.deps.services.ledger;
    if (ledger) ledger.record(row, this.lease !== null);
    else this.deps.services.usageQueue.push(row);
    return price.usd;
  }

  /**
   * Replaces the reservation with the real cost (releasing it on error, disconnect or fallback);
   * keys without a budget still add their spend to the month counter /v1/key reports. Once only.
   */
  settle(): void {
    if (this.settled) return;
    this.settled = true;
    const { deps, key } = this;
    if (this.rate) deps.services.rateLimits.release(this.rate, this.tokensUsed);
    if (this.lease) {
      deps.services.leases!.settle(this.lease, this.uid, toNano(this.countedUsd));
      this.lease = null;
      this.reservation = null;
      return;
    }
    if (this.inLedger && this.reservation) {
      deps.services.ledger!.settle(key, this.uid, this.reservation.month, this.reservation.nano, toNano(this.countedUsd));
      this.reservation = null;
      return;
    }
    const res = this.reservation ?? (this.countedUsd > 0 ? { keyId: key.id, month: monthKey(), nano: 0 } : null);
    this.reservation = null;
    if (!res) return;
    deps.services.settleBatcher.settle(key, res, this.countedUsd);
  }
}

/** Gives each prompt of a batch its token share of the batch's hold; the leases stay with the batch. */
function batchShare(hold: RateHold, tokens: number[]) {
  const batch = { left: tokens.length, leaseIds: hold.leaseIds };
  return (call: MoneyCall, i: number) => {
    call.rate = { ...hold, tokens: tokens[i] ?? 0, leaseIds: [], batch };
    return call;
  };
}

/** How many prompts of an admitted batch may run at once: its leases on a key with a cap. */
export const batchParallelism = (calls: MoneyCall[], max: number) =>
  Math.min(max, calls[0]?.rate?.batch?.leaseIds.length || max);
