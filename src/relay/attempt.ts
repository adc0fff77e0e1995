// One lane, one upstream call (README "Architecture in one screen"): pick pass-through or translation, build the
// body, send with an AbortController tied to the client and the upstream timeout, classify
// the answer. Knows protocols only through the codec tables and vendors only through adapters.
import { GatewayError } from "../errors.ts";
import { clientCodecs } from "../protocols/index.ts";
import type { Json, UpstreamCodec, Usage } from "../protocols/types.ts";
import { isErrorBody } from "../protocols/error-body.ts";
import { getAdapter } from "../providers/registry.ts";
import type { ProviderAdapter, ResolvedLane } from "../providers/types.ts";
import { choicesOf, clientOutputLimit, fitWireLimit, worstOutputTokens } from "../money/output-limits.ts";
import { BodyTooLarge, MAX_UPSTREAM_ANSWER_BYTES, MAX_UPSTREAM_ERROR_BYTES, readTextCapped } from "../net/read-capped.ts";
import type { LaneTry } from "../http/access-log.ts";
import { planBody, type Plan } from "./plan.ts";
import type { RelayRequest } from "./relay-request.ts";
import { credentialRefusedHint, modelNotFound, noCredential, upstreamRejected, type LaneFailure } from "./relay-errors.ts";
import { defaultModelRetry, laneModel } from "./routing/model.ts";
import { retryAfterMs } from "./routing/cooldowns.ts";
import { affinityResult } from "./routing/affinity.ts";
import { PassThroughTap } from "./stream/sse-tap.ts";
import type { Tap } from "./stream/tap.ts";
import { TranslateTap } from "./stream/translate.ts";
import { costNumber } from "./stream/usage-cost.ts";
import { scrubSecrets, secretsOfCall } from "./secret-scrub.ts";

export type { Endpoint, RelayRequest, Upload } from "./relay-request.ts";
export { servesShape } from "./plan.ts";

export type LaneResult =
  | { kind: "json"; attempt: Attempt; status: number; text: string; parsed: Json; usage: Usage }
  | { kind: "body"; attempt: Attempt; status: number; text: string; contentType: string }
  | { kind: "stream"; attempt: Attempt; res: Response; tap: Tap; ac: AbortController; done(): void }
  | { kind: "failed"; failure: LaneFailure }
  | { kind: "client"; error: GatewayError }
  | { kind: "aborted" }
  /** A count (RelayRequest.count) on a lane that serves but whose vendor cannot count: the caller answers its estimate. */
  | { kind: "uncounted" };

/** Usage when the upstream reported none: a quarter token per byte in, `completion` out. */
export function estimatedUsage(rr: RelayRequest, completion: number): Usage {
  return { prompt_tokens: Math.ceil(rr.bytes / 4), completion_tokens: completion, cached_tokens: 0, cache_write_tokens: 0 };
}

/**
 * What an attempt the upstream accepted but that ended early (abandoned, timed out, broken) cost
 * (CONTRACT §7): the prompt as the upstream counted it when that count arrived, else the estimate,
 * plus every output token received: the upstream's count or the deltas' (`deltaTokens`), whichever
 * is larger. `counted` is true when the upstream's own counts cover both.
 */
export function usageSoFar(rr: RelayRequest, reported: Usage | null, deltaTokens: number): { usage: Usage; counted: boolean } {
  const promptKnown = reported !== null && reported.prompt_tokens > 0;
  const out = Math.max(reported?.completion_tokens ?? 0, deltaTokens);
  const usage: Usage = reported
    ? { ...reported, prompt_tokens: promptKnown ? reported.prompt_tokens : estimatedUsage(rr, 0).prompt_tokens, completion_tokens: out }
    : estimatedUsage(rr, out);
  return { usage, counted: promptKnown && reported!.completion_tokens >= deltaTokens };
}

/** The error code of an abandoned attempt's record: why it ended, and whether its tokens are the upstream's count. */
export const abandonedCode = (why: "client_closed" | "timeout", counted: boolean) => `${why}_tokens_${counted ? "counted" : "estimated"}`;

/**
 * Writes the request's cost into a chat, Responses or Messages answer's `usage` (each keeps it at
 * the top level), replacing an upstream's own `cost` (and its breakdown). False when the answer has no usage.
 */
export function withCost(answer: Json, usd: number): boolean {
  const u = answer.usage;
  if (!u || typeof u !== "object" || Array.isArray(u)) return false;
  u.cost = costNumber(usd);
  delete u.cost_details;
  return true;
}

/** The record of one upstream attempt; finish() records it with the request's money exactly once. */
export class Attempt {
  readonly startedAt = performance.now();
  ttfbMs: number | null = null;
  /** The request fields this lane's body adapted (CONTRACT §9: `field=action, …`), null when none. */
  adapted: string | null = null;
  private finished = false;
  /** The record's entry for this attempt: the lane (or the classifier's aside) started last. */
  private readonly tried: LaneTry | null;

  /** The model recorded and priced: what the upstream was asked for (after any alias the adapter resolved). */
  constructor(readonly rr: RelayRequest, readonly lane: ResolvedLane, readonly adapter: ProviderAdapter, public model: string) {
    this.tried = rr.access.current;
  }

  get provider(): string { return this.lane.provider; }

  markFirstByte(): void { if (this.ttfbMs === null) this.ttfbMs = Math.round(performance.now() - this.startedAt); }

  finish(status: number, outcome: "ok" | "error" | "aborted" | "broken", errorCode: string | null, usage: Usage | null): void {
    if (this.finished) return;
    this.finished = true;
    const rr = this.rr;
    const latencyMs = performance.now() - this.startedAt;
    // Counting tokens is free at the vendor: it leaves no usage record (docs/api.md).
    const cost = rr.count ? 0 : rr.money.record({
      adapter: this.adapter,
      provider: this.lane.provider,
      // The classifier's lane is not one of the key's (index -1): its records carry no lane.
      laneIndex: this.lane.index < 0 ? null : this.lane.index,
      model: this.model || null,
      status,
      outcome,
      errorCode,
      usage,
      latencyMs: Math.round(latencyMs),
      ttfbMs: this.ttfbMs,
      adapted: this.adapted,
      affinity: rr.affinity && this.lane.index >= 0 ? affinityResult(rr.affinity, this.lane) : null,
    });
    if (this.tried) rr.access.attemptEnded(this.tried, this.model, outcome, latencyMs, this.ttfbMs, usage ? usage.prompt_tokens : null, usage ? usage.completion_tokens : 0, cost);
    // The access line names what the answering lane adapted (the classifier's call is no answer).
    if ((outcome === "ok" || outcome === "broken") && this.lane.index >= 0) rr.access.adapted = this.adapted;
  }

  /** The upstream answered with an error, timed out or could not be reached (after finish()). */
  upstreamFailed(status: number, code: string): void {
    if (this.tried) this.rr.access.upstreamFailed(this.tried, status, code);
  }
}

class TimeoutError extends Error { override name = "TimeoutError"; }

const failed = (lane: ResolvedLane, status: number, code: string, message: string): LaneResult => ({
  kind: "failed",
  failure: { provider: lane.provider, laneIndex: lane.index, status, code, message },
});

/** Tries one lane, including the one retry of fallback_to_default_model. */
export async function tryLane(rr: RelayRequest, lane: ResolvedLane): Promise<LaneResult> {
  const adapter = getAdapter(lane.provider);
  if (!adapter) return failed(lane, 0, "unsupported_provider", `The provider "${lane.provider}" is not supported by this gateway.`);
  const why = adapter.unavailable(lane);
  if (why) return failed(lane, 0, "lane_unavailable", why);
  if (adapter.kind === "api_key" && !lane.credential) {
    // SPEC: a streaming request on a lane whose saved key is gone is the client's 400; a plain one fails over.
    if (rr.stream) return { kind: "client", error: noCredential(lane.provider, lane.index) };
    return failed(lane, 0, "no_credential", `The ${lane.provider} lane's saved API key was deleted.`);
  }
  // An upload names its model inside the multipart body, which is sent as it came: none recorded.
  let model = rr.upload ? "" : laneModel(rr.model, lane);
  for (;;) {
    const r = await attemptOnce(rr, lane, adapter, model);
    if (r.kind !== "model") return r;
    const retry = defaultModelRetry(model, lane);
    if (!retry) {
      // The client's model is unknown here: theirs to fix (CONTRACT §8). The lane's own model
      // unknown after the retry is the operator's misconfiguration: an ordinary lane failure.
      if (model === rr.model) r.failure.error = modelNotFound(lane.provider, lane.index, model, r.failure.message);
      return { kind: "failed", failure: r.failure };
    }
    model = retry;
  }
}

type OnceResult = LaneResult | { kind: "model"; failure: LaneFailure };

async function attemptOnce(rr: RelayRequest, lane: ResolvedLane, adapter: ProviderAdapter, model: string): Promise<OnceResult> {
  const { ctx } = rr;
  let plan: Plan | string | null;
  try {
    plan = planBody(rr, adapter, model);
  } catch (e) {
    if (!(e instanceof GatewayError)) throw e;
    // A parameter this lane's protocol cannot express is this lane's failure, recorded as such;
    // the chain moves on, and the client gets the 400 only when no lane can serve (CONTRACT §8).
    if (e.code === "unsupported_feature") {
      new Attempt(rr, lane, adapter, model).finish(0, "error", "unsupported_feature", null);
      return { kind: "failed", failure: { provider: lane.provider, laneIndex: lane.index, status: 400, code: "unsupported_feature", message: e.message, error: e } };
    }
    return { kind: "client", error: e }; // the request itself is malformed: no lane can help
  }
  if (plan === null) return { kind: "uncounted" };
  if (typeof plan === "string") return failed(lane, 0, "unsupported_shape", plan);
  const { codec, protocol, client, direct, body } = plan;
  const upload = plan.kind === "upload" ? rr.upload! : null;
  const count = plan.kind === "count";
  if (plan.kind === "inference") {
    if (client) adapter.fitTranslated?.(body, protocol, model);
    adapter.applySettings(body, lane, protocol);
    // What this lane receives, after translation and the lane's settings, stays within what the
    // request was admitted for (CONTRACT §7): its output limit times its choices.
    const cap = clientOutputLimit(rr.body);
    if (cap !== null && !direct) fitWireLimit(body, protocol, cap, choicesOf(rr.body));
  }
  const attempt = new Attempt(rr, lane, adapter, model);
  attempt.adapted = plan.adapted;
  rr.adapted = plan.adapted;

  const ac = new AbortController();
  const onClientAbort = () => ac.abort();
  rr.signal.addEventListener("abort", onClientAbort);
  const timer = setTimeout(() => ac.abort(new TimeoutError()), ctx.config.UPSTREAM_TIMEOUT_SECONDS * 1000);
  let released = false;
  const release = () => {
    if (released) return;
    released = true;
    clearTimeout(timer);
    rr.signal.removeEventListener("abort", onClientAbort);
  };

  let res: Response;
  // What this lane's upstream was sent and could echo back in its error text (secret-scrub.ts).
  let secrets: string[] = [];
  // From the moment the body is on its way, an abandoned or timed-out attempt pays its prompt.
  let sending = false;
  try {
    if (upload) {
      sending = !ac.signal.aborted;
      rr.money.beforeUpstream();
      const { contentType, accept, bytes } = upload;
      res = await adapter.transcribe!(ctx, lane, { contentType, accept, body: () => new Blob([bytes]).stream(), signal: ac.signal });
    } else res = await sendInference();
  } catch (e) {
    release();
    return sendFailure(rr, attempt, ac, e, secrets, sending);
  }
  async function sendInference(): Promise<Response> {
    const clientHeaders = client === null ? rr.clientHeaders : undefined;
    const call = count ? adapter.countTokens!({ ctx, lane, body, clientHeaders }) : await adapter.prepare({ ctx, lane, protocol, body, model, stream: rr.stream, clientHeaders });
    secrets = secretsOfCall(call);
    const sent = call.model ?? body.model;
    if (typeof sent === "string" && sent) attempt.model = sent;
    sending = !ac.signal.aborted;
    rr.money.beforeUpstream();
    return adapter.send(ctx, lane, call, ac.signal);
  }
  // Time to first byte: the answer's headers for a plain request; streams mark their first event.
  if (!rr.stream) attempt.markFirstByte();

  if (!res.ok) {
    let text = "";
    try {
      text = await readTextCapped(res, MAX_UPSTREAM_ERROR_BYTES);
    } catch {}
    release();
    const raw = codec.errorOf(res.status, text);
    // Upstream text: the lane's secret (any fragment of it) is cut before a client, log or record sees it.
    const info = { ...raw, message: scrubSecrets(errorText(raw.message), secrets), code: raw.code === undefined ? undefined : scrubSecrets(errorText(raw.code), secrets) };
    const code = info.code ?? `http_${res.status}`;
    attempt.finish(res.status, "error", code, null);
    attempt.upstreamFailed(res.status, code);
    const failure: LaneFailure = { provider: lane.provider, laneIndex: lane.index, status: res.status, code, message: info.message, retryAfterMs: retryAfterMs(res.headers) };
    // 401/403 from a vendor on a saved key: the key is the problem, and only its owner can fix it.
    if (adapter.kind === "api_key" && (res.status === 401 || res.status === 403)) failure.hint = credentialRefusedHint(lane.provider, lane.index, rr.key.id);
    if (info.modelNotFound) return { kind: "model", failure };
    if (info.retryable) return { kind: "failed", failure };
    return { kind: "client", error: upstreamRejected(lane.provider, res.status, info.message, info.code, info.param) };
  }

  if (!rr.stream) {
    let text: string;
    try {
      text = await readTextCapped(res, MAX_UPSTREAM_ANSWER_BYTES);
    } catch (e) {
      release();
      if (e instanceof BodyTooLarge && !rr.signal.aborted) {
        // The upstream answered, and billed, but the gateway will not hold the answer: not
        // observed to its end, it is charged its worst case (CONTRACT §7), and the next lane may serve.
        const worst = worstOutputTokens(clientOutputLimit(rr.body), attempt.model) * choicesOf(rr.body);
        attempt.finish(res.status, "broken", "answer_too_large", usageSoFar(rr, null, worst).usage);
        attempt.upstreamFailed(res.status, "answer_too_large");
        return failed(lane, res.status, "answer_too_large", `The upstream's answer was not read: ${e.message}.`);
      }
      return sendFailure(rr, attempt, ac, e, secrets, true);
    }
    release();
    if (upload || count) {
      // An upload is priced by the catalog in tokens, which its answer does not report: recorded at 0.
      // A count is answered as the vendor sent it, and recorded nowhere.
      attempt.finish(res.status, "ok", null, null);
      return { kind: "body", attempt, status: res.status, text, contentType: res.headers.get("content-type") ?? "application/json" };
    }
    let parsed: Json;
    try {
      parsed = JSON.parse(text);
    } catch {
      attempt.finish(res.status, "error", "bad_upstream_body", null);
      return failed(lane, res.status, "bad_upstream_body", "The upstream answered 2xx with a body that is not JSON.");
    }
    if (isErrorBody(parsed)) {
      // A 2xx whose body is an error (a vendor or proxy that reports failures this way): the
      // lane failed. Translated as an answer it became an empty message (an empty `end_turn` on
      // /v1/messages) and was cached; as a failure the next lane may serve, or the client gets
      // the error in its own protocol.
      const raw = codec.errorOf(502, text);
      const message = scrubSecrets(raw.message, secrets);
      attempt.finish(res.status, "error", "upstream_error_body", null);
      attempt.upstreamFailed(res.status, "upstream_error_body");
      return failed(lane, res.status, "upstream_error_body", `The upstream answered ${res.status} with an error: ${message}`);
    }
    let usage: Usage | null;
    if (direct) {
      const d = direct.decodeResponse(parsed, { model, request: rr.body });
      usage = d.usage;
      if (d.body) {
        parsed = d.body;
        text = JSON.stringify(parsed);
      }
    } else if (client === null) {
      // Pass-through: the client gets the upstream's bytes; only usage is read.
      usage = codec.usageOf!(parsed);
    } else {
      const d = codec.decodeResponse!(parsed, { model });
      usage = d.usage;
      parsed = client.fromPivot(d.completion, d.usage, rr.body);
      text = JSON.stringify(parsed);
    }
    const u = usage ?? estimatedUsage(rr, Math.ceil(text.length / 4));
    attempt.finish(res.status, "ok", null, u);
    // CONTRACT §9: the answer's usage carries what the request's records cost, never the upstream's own price.
    if (!direct && withCost(parsed, rr.money.recordedUsd)) text = JSON.stringify(parsed);
    return { kind: "json", attempt, status: res.status, text, parsed, usage: u };
  }

  if (!res.body) {
    release();
    attempt.finish(res.status, "broken", "empty_stream", null);
    return failed(lane, res.status, "empty_stream", "The upstream answered the stream with an empty body.");
  }
  // From here the stream driver owns the timeout (idle-based) and the abort.
  clearTimeout(timer);
  // The request's cost once this attempt is recorded with `u`: what the stream's last usage carries.
  const costOf = (u: Usage) => rr.money.quote(adapter, attempt.model || null, u);
  const tap = client === null
    ? new PassThroughTap(codec as UpstreamCodec, rr.body, clientCodecs[rr.shape], secrets, costOf)
    : new TranslateTap(codec.streamDecoder!({ model, id: `chatcmpl-${rr.requestId}`, created: Math.floor(Date.now() / 1000) }), client.streamEncoder(rr.body), costOf);
  return { kind: "stream", attempt, res, tap, ac, done: release };
}

/**
 * An attempt that got no answer. `sent`: the body was on its way, so an abandoned or timed-out
 * attempt is charged its prompt (estimated: a plain answer's counts come only with it); one the
 * client left before anything was sent costs nothing.
 */
function sendFailure(rr: RelayRequest, attempt: Attempt, ac: AbortController, e: unknown, secrets: string[], sent: boolean): OnceResult {
  const lane = attempt.lane;
  if (rr.signal.aborted) {
    if (sent) attempt.finish(0, "aborted", abandonedCode("client_closed", false), usageSoFar(rr, null, 0).usage);
    else attempt.finish(0, "aborted", "client_closed", null);
    return { kind: "aborted" };
  }
  if (ac.signal.reason instanceof TimeoutError) {
    if (sent) attempt.finish(0, "aborted", abandonedCode("timeout", false), usageSoFar(rr, null, 0).usage);
    else attempt.finish(0, "error", "timeout", null);
    attempt.upstreamFailed(0, "timeout");
    return failed(lane, 0, "timeout", `The upstream did not answer within ${rr.ctx.config.UPSTREAM_TIMEOUT_SECONDS} s.`);
  }
  if (e instanceof GatewayError) {
    if (!e.retryable) return { kind: "client", error: e };
    attempt.finish(0, "error", e.code ?? "lane_failed", null);
    return failed(lane, 0, e.code ?? "lane_failed", scrubSecrets(errorText(e.message), secrets));
  }
  attempt.finish(0, "error", "connection_failed", null);
  attempt.upstreamFailed(0, "connection_failed");
  const why = scrubSecrets(errorText(e instanceof Error ? e.message : String(e)), secrets);
  return failed(lane, 0, "connection_failed", `Could not reach the upstream: ${why}`);
}

export { TimeoutError };

/** Upstream error text kept for the scrub and what follows it (a client sees at most 600 characters of it). */
const ERROR_TEXT_KEPT = 16 * 1024;
function errorText(text: string): string {
  return text.length > ERROR_TEXT_KEPT ? text.slice(0, ERROR_TEXT_KEPT) : text;
}
