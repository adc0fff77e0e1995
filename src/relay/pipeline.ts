// The hot path, top-down (README "Architecture in one screen"): auth → body → admission (budget reserve) →
// plan → lanes in order → relay → settle. handleInference answers HTTP; runChat is the same
// executor without an HTTP response, for /blitz.
import type { RelayDeps } from "./relay-deps.ts";
import { asGatewayError, GatewayError, unsupportedFeature } from "../errors.ts";
import type { AccessEntry } from "../http/access-log.ts";
import type { RequestContext } from "../http/route.ts";
import { clientCodecs, directCodecs } from "../protocols/index.ts";
import type { ChatRequest, ClientShape, Json, Usage } from "../protocols/types.ts";
import type { ResolvedLane } from "../providers/types.ts";
import { getAdapter } from "../providers/registry.ts";
import { servesShape, type Endpoint, type LaneResult, type RelayRequest } from "./attempt.ts";
import { pivotOf } from "./plan.ts";
import { resolveRoutingKey, type KeySource } from "./auth.ts";
import { forwardedHeaders } from "./client-headers.ts";
import { MoneyCall } from "../money/money.ts";
import { withOutputLimit } from "../money/output-limits.ts";
import { checkOutputAsk, checkServerState } from "../money/request-checks.ts";
import type { KeyContext } from "./key-context.ts";
import { allLanesFailed, noProviders, type LaneFailure } from "./relay-errors.ts";
import { readInferenceBody, type FromPath, type InferenceBody } from "./request-body.ts";
import { classifyLanes } from "./routing/classifier.ts";
import { affinityFirst, sessionOf } from "./routing/affinity.ts";
import { LaneRunner } from "./lane-runner.ts";
import { keepAliveResponse, streamResponse } from "./stream/relay-stream.ts";
import { rateHeaders } from "./limits/headers.ts";
import { costHeaders } from "./cost-headers.ts";
import { requestTags, tagsRequired } from "./tags.ts";

export { estimateCostUsd } from "../money/estimate.ts";

/**
 * Admits the request with its money (reserve, or 402) and lowers its output limit when the
 * remaining budget pays for less than its worst case.
 */
async function admit(ctx: RelayDeps, key: KeyContext, endpoint: Endpoint, shape: ClientShape, requestId: string, body: Json, bytes: number, ownEntry = false, tags: string[] | null = null): Promise<{ money: MoneyCall; body: Json }> {
  const money = await MoneyCall.open(ctx, key, { requestId, endpoint, ownEntry, tags }, body, bytes);
  return { money, body: money.outputLimit === null ? body : withOutputLimit(body, shape, money.outputLimit) };
}

function pivotFor(rr: RelayRequest): ChatRequest {
  if (rr.pivot) return rr.pivot;
  const codec = clientCodecs[rr.shape];
  return codec ? pivotOf(rr, codec) : (rr.body as ChatRequest);
}

const laneServes = (lane: ResolvedLane, shape: ClientShape) => {
  const adapter = getAdapter(lane.provider);
  return !adapter || servesShape(adapter, shape);
};

/** CONTRACT §8: 400 only when no lane of the key can serve the request at all. */
const noLaneServes = (shape: ClientShape) =>
  unsupportedFeature(`None of this routing key's lanes can serve ${shape} requests; add a lane whose provider offers them (e.g. openai or google for embeddings).`);

/** The usage-record endpoint of a client shape. */
const ENDPOINT_OF: Record<ClientShape, Endpoint> = { chat: "chat", responses: "responses", anthropic: "messages", embeddings: "embeddings", gemini: "generate_content" };

function newRelayRequest(ctx: RelayDeps, key: KeyContext, i: { endpoint: Endpoint; shape: ClientShape; body: Json; bytes: number; stream: boolean; requestId: string; signal: AbortSignal; money: MoneyCall; access: AccessEntry }): RelayRequest {
  return {
    access: i.access,
    ctx, key,
    endpoint: i.endpoint,
    shape: i.shape,
    body: i.body,
    bytes: i.bytes,
    stream: i.stream,
    model: String(i.body.model),
    requestId: i.requestId,
    signal: i.signal,
    money: i.money,
  };
}

/** The request's end, in its record: outcome, the provider that served (or was last tried), time to first byte. */
function done(rr: RelayRequest, outcome: string, provider: string | null, ttfbMs: number | null) {
  rr.money.settle();
  const access = rr.access;
  access.outcome = outcome;
  access.provider = provider;
  access.served = outcome === "ok" ? provider : null;
  access.ttfbMs = ttfbMs;
}

/**
 * A request turned away before any provider was tried (401/410/403 key, 413/400 body or lanes,
 * 402 budget) still counts in gateway_requests_total, with no provider. Only the error path pays.
 */
function refused(endpoint: Endpoint, e: unknown, access: AccessEntry): void {
  const status = e instanceof GatewayError ? e.status : 500;
  access.outcome = status < 500 ? "refused" : "error";
  access.noteRefusal(endpoint, e);
}

/** Where each client protocol's SDK sends its key. */
const KEY_SOURCE: Partial<Record<ClientShape, KeySource>> = { anthropic: "anthropic", gemini: "google" };

/**
 * POST /v1/chat/completions, /v1/responses, /v1/messages and Gemini's generateContent (`fromPath`:
 * its model and streaming choice, from the URL). Order: key 401 → body 413/400 → lanes 400 → budget 402 → limits 429.
 */
export async function handleInference(ctx: RelayDeps, rc: RequestContext, shape: ClientShape, fromPath?: FromPath): Promise<Response> {
  const endpoint = ENDPOINT_OF[shape];
  rc.access.endpoint = endpoint;
  let key: KeyContext;
  let parsed: InferenceBody;
  try {
    key = await resolveRoutingKey(ctx, rc.request, KEY_SOURCE[shape] ?? "bearer");
    rc.access.keyPrefix = key.keyPrefix;
    parsed = await readInferenceBody(rc.request, shape, ctx.config.MAX_REQUEST_BYTES, fromPath);
    rc.access.model = parsed.model;
    // CONTRACT §9: the request's tags (400 when malformed, or missing on a key that requires them).
    parsed.tags = requestTags(rc.request.headers, parsed.body);
    if (parsed.tags === null && key.requireTags) throw tagsRequired();
    ctx.services.usageQueue.touchKey(key.id);
    if (key.lanes.length === 0) throw noProviders();
    if (!key.lanes.some((l) => laneServes(l, shape))) throw noLaneServes(shape);
    checkOutputAsk(parsed.body, shape);
    checkServerState(parsed.body, shape, key.monthlyBudgetUsd !== null);
  } catch (e) {
    refused(endpoint, e, rc.access);
    throw e;
  }
  // The response cache (docs/caching.md): a key without one pays this one check and nothing else.
  if (key.cache) return ctx.services.responseCache.serve(rc, key, shape, endpoint, parsed, (admitted) => relay(ctx, rc, key, shape, parsed, admitted));
  return relay(ctx, rc, key, shape, parsed);
}

/** Admission (budget 402, limits 429), then the lanes; `admitted` sees the request's money. */
async function relay(ctx: RelayDeps, rc: RequestContext, key: KeyContext, shape: ClientShape, parsed: InferenceBody, admitted?: (money: MoneyCall) => void): Promise<Response> {
  const endpoint = ENDPOINT_OF[shape];
  // CONTRACT §9: the session's lane is read from the store while the request is admitted.
  const session = key.affinityTtlSeconds !== null && !directCodecs[shape] ? sessionOf(rc.request.headers, parsed.body) : null;
  const entry = session !== null ? ctx.services.affinity.entryOf(key.id, session) : null;
  const remembered = entry !== null ? ctx.services.affinity.lookup(entry) : null;
  let rr: RelayRequest;
  try {
    const { money, body } = await admit(ctx, key, endpoint, shape, rc.requestId, parsed.body, parsed.bytes, false, parsed.tags ?? null);
    admitted?.(money);
    if (money.rate) rc.headers = rateHeaders(money.rate.limits, money.rate.verdict);
    rr = newRelayRequest(ctx, key, { endpoint, shape, body, bytes: parsed.bytes, stream: parsed.stream, requestId: rc.requestId, signal: rc.request.signal, money, access: rc.access });
    rr.clientHeaders = forwardedHeaders(shape, rc.request);
  } catch (e) {
    refused(endpoint, e, rc.access);
    throw e;
  }

  let first: LaneResult;
  let runner: LaneRunner;
  try {
    const key = rr.key;
    let lanes = key.lanes;
    // The session's lane first; a session with one is not classified again (classifier keys classify once per session).
    let pinned = false;
    if (entry !== null) {
      const a = affinityFirst(key.lanes, await remembered);
      rr.affinity = { entry, ttlSeconds: key.affinityTtlSeconds!, remembered: a.remembered };
      lanes = a.lanes;
      pinned = a.found;
    }
    // The classifier reads a conversation; shapes without one (embeddings) keep the key's order.
    if (!pinned && key.mode === "classifier" && !directCodecs[shape]) lanes = await classifyLanes(ctx, key, pivotFor(rr), rr.signal, rr.access, rr.money.opts.tags ?? null);
    runner = new LaneRunner(rr, lanes);
    const pending = runner.next();
    // CONTRACT §8: a stream whose upstream is silent for KEEPALIVE_MS gets its headers and comments now.
    const answered = rr.stream ? await withinKeepAlive(pending, ctx.config.KEEPALIVE_MS) : await pending;
    if (answered === null) {
      rc.access.holdForStream();
      // The headers go now: they name what the lane being tried adapted (a later lane's may differ).
      adaptedHeader(rc, rr.adapted ?? null);
      return keepAliveResponse(rr, pending, { ...streamHooks(rr, rc, runner), errorOf: laneError });
    }
    first = answered;
  } catch (e) {
    done(rr, "error", null, null);
    throw e;
  }
  switch (first.kind) {
    case "json":
    case "body":
      done(rr, "ok", first.attempt.provider, first.attempt.ttfbMs);
      adaptedHeader(rc, first.attempt.adapted);
      return new Response(first.text, { status: first.status, headers: { "content-type": first.kind === "body" ? first.contentType : "application/json", ...costHeaders(rr.money) } });
    case "stream":
      rc.access.holdForStream();
      adaptedHeader(rc, first.attempt.adapted);
      return streamResponse(rr, first, streamHooks(rr, rc, runner));
    case "aborted":
      done(rr, "aborted", null, null);
      return new Response(null, { status: 499 });
    case "client":
    case "failed":
    case "uncounted": {
      const err = laneError(first);
      // Counted under the provider last tried (gateway_requests_total's help text), null if none was.
      done(rr, "error", runner.lastProvider, null);
      throw err;
    }
  }
}

/** CONTRACT §9: an answer names the fields its lane got mapped, dropped or moved, before its first byte. */
function adaptedHeader(rc: RequestContext, adapted: string | null): void {
  if (adapted !== null) rc.headers = { ...rc.headers, "x-gateway-adapted": adapted };
}

/** The client's error for a runner result that is no answer. */
function laneError(r: LaneResult): GatewayError {
  if (r.kind === "client") return r.error;
  if (r.kind === "failed") return allLanesFailed(1, r.failure);
  return new GatewayError(500, "The gateway got an answer it cannot stream; retry the request.", { code: "unhandled" });
}

/** How a committed stream moves to the next lane and closes the request once it ends. */
function streamHooks(rr: RelayRequest, rc: RequestContext, runner: LaneRunner) {
  return {
    nextLane: (f: LaneFailure) => {
      runner.failed(f);
      return runner.next();
    },
    done: (outcome: "ok" | "broken" | "aborted" | "error", _status: number, provider: string | null, ttfbMs: number | null) => {
      // A stream that failed before any lane answered counts under the provider last tried.
      done(rr, outcome, provider ?? (outcome === "error" ? runner.lastProvider : null), ttfbMs);
      rc.access.streamEnded();
    },
  };
}

/**
 * The lane runner's first result, or null when KEEPALIVE_MS passed first. One timer, cleared as
 * soon as the upstream answers: the fast path costs nothing more.
 */
function withinKeepAlive(pending: Promise<LaneResult>, ms: number): Promise<LaneResult | null> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, ms, null);
    pending.then(
      (r) => {
        clearTimeout(timer);
        resolve(r);
      },
      (e) => {
        clearTimeout(timer);
        reject(e);
      },
    );
  });
}

export type RunChatResult =
  /** `lowered`: the gateway lowered the output limit near the budget's end (the answer may be cut short by it). */
  | { ok: true; status: number; body: Json; usage: Usage; provider: string; costUsd: number; lowered: boolean }
  | { ok: false; error: GatewayError; costUsd: number };

export interface RunChatOptions {
  shape?: ClientShape;
  stream?: false;
  signal: AbortSignal;
  endpoint?: Endpoint;
  requestId: string;
  /** The request's money when the caller admitted it (blitz reserves a batch at once); else runChat admits it. Settled here either way. */
  money?: MoneyCall;
  /** Size of the request in bytes when known (sharpens the estimate). */
  bodyBytes?: number;
  /** Admitted with its own in-flight entry, never from a budget lease (see OpenOptions.ownEntry). */
  ownEntry?: boolean;
  /** The prompt's record (RequestTracker.openPart), released by the caller; else runChat opens and releases one. */
  record?: AccessEntry;
  /** The request's tags (CONTRACT §9) when runChat admits it; a caller's `money` carries its own. */
  tags?: string[] | null;
}

/**
 * Runs one non-streaming request through the key's lanes without producing an HTTP response
 * (the /blitz executor). Never throws for request-level failures: they come back as `error`.
 */
export async function runChat(ctx: RelayDeps, key: KeyContext, body: Json, opts: RunChatOptions): Promise<RunChatResult> {
  const endpoint = opts.endpoint ?? "blitz";
  if (opts.record) return runPrompt(ctx, key, body, opts, endpoint, opts.record);
  const record = ctx.services.requestTracker.openPart(opts.requestId, endpoint);
  try {
    return await runPrompt(ctx, key, body, opts, endpoint, record);
  } finally {
    record.release();
  }
}

async function runPrompt(ctx: RelayDeps, key: KeyContext, body: Json, opts: RunChatOptions, endpoint: Endpoint, record: AccessEntry): Promise<RunChatResult> {
  const shape = opts.shape ?? "chat";
  const bytes = opts.bodyBytes ?? JSON.stringify(body.messages ?? body.input ?? "").length;
  let money = opts.money;
  try {
    if (key.lanes.length === 0) throw noProviders();
    let sent: Json = { ...body, stream: false };
    if (!money) ({ money, body: sent } = await admit(ctx, key, endpoint, shape, opts.requestId, sent, bytes, opts.ownEntry, opts.tags ?? null));
    const rr = newRelayRequest(ctx, key, { endpoint, shape, body: sent, bytes, stream: false, requestId: opts.requestId, signal: opts.signal, money, access: record });
    const lanes = key.mode === "classifier" ? await classifyLanes(ctx, key, pivotFor(rr), rr.signal, record, money.opts.tags ?? null) : key.lanes;
    const runner = new LaneRunner(rr, lanes);
    const r = await runner.next();
    if (r.kind === "json") {
      done(rr, "ok", r.attempt.provider, r.attempt.ttfbMs);
      return { ok: true, status: r.status, body: r.parsed, usage: r.usage, provider: r.attempt.provider, costUsd: money.countedUsd, lowered: money.outputLimit !== null };
    }
    const err = r.kind === "client" ? r.error
      : r.kind === "failed" ? allLanesFailed(1, r.failure)
      : new GatewayError(499, "The request was cancelled before an answer arrived.", { code: "cancelled" });
    done(rr, r.kind === "aborted" ? "aborted" : "error", runner.lastProvider, null);
    return { ok: false, error: err, costUsd: money.countedUsd };
  } catch (e) {
    money?.settle();
    record.noteRefusal(endpoint, e);
    return { ok: false, error: asGatewayError(e), costUsd: money?.countedUsd ?? 0 };
  }
}
