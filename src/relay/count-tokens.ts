// POST /v1/messages/count_tokens: the input tokens of a Messages request, as Anthropic's endpoint
// answers ({"input_tokens": n}). The key's lanes are walked in order, as a request would be:
// a lane whose vendor counts exactly (adapter.countTokens: Anthropic) gets the request forwarded
// with the client's anthropic-version/beta; the first lane that cannot count answers with the
// relay's estimate (about 4 bytes of the request's system, messages and tools JSON per token),
// marked `x-token-count: estimated`. A lane that fails (connection, 429, 5xx, its own key) moves
// on; an upstream 4xx about the request goes back to the client. Counting is free at Anthropic:
// no budget is reserved and no usage record is written.
import type { Ctx } from "../context.ts";
import { GatewayError } from "../errors.ts";
import type { RequestContext } from "../http/route.ts";
import { anthropicCodec } from "../protocols/anthropic/index.ts";
import type { Json } from "../protocols/types.ts";
import { getAdapter } from "../providers/registry.ts";
import type { ResolvedLane } from "../providers/types.ts";
import { resolveRoutingKey } from "./auth.ts";
import { MoneyCall } from "./budget/money.ts";
import type { KeyContext } from "./key-context.ts";
import { forwardedHeaders } from "./client-headers.ts";
import { allLanesFailed, noProviders, upstreamRejected, type LaneFailure } from "./relay-errors.ts";
import { readInferenceBody } from "./request-body.ts";
import { laneModel } from "./routing/model.ts";
import { scrubSecrets, secretsOfCall } from "./secret-scrub.ts";

/** The documented estimate: a quarter token per byte of what the model reads. */
export function estimateInputTokens(body: Json): number {
  const read = JSON.stringify([body.system ?? null, body.messages ?? [], body.tools ?? null]);
  return Math.max(1, Math.ceil(Buffer.byteLength(read, "utf8") / 4));
}

const answer = (body: string, kind: "exact" | "estimated") =>
  new Response(body, { status: 200, headers: { "content-type": "application/json", "x-token-count": kind } });

async function countOn(ctx: Ctx, lane: ResolvedLane, body: Json, headers: Record<string, string> | undefined, signal: AbortSignal): Promise<Response | LaneFailure | GatewayError> {
  const adapter = getAdapter(lane.provider)!;
  const fail = (status: number, code: string, message: string): LaneFailure => ({ provider: lane.provider, laneIndex: lane.index, status, code, message });
  const model = laneModel(String(body.model), lane);
  let res: Response;
  let secrets: string[] = [];
  try {
    const call = adapter.countTokens!({ ctx, lane, body: model === body.model ? body : { ...body, model }, clientHeaders: headers });
    secrets = secretsOfCall(call);
    res = await adapter.send(ctx, lane, call, AbortSignal.any([signal, AbortSignal.timeout(ctx.config.UPSTREAM_TIMEOUT_SECONDS * 1000)]));
  } catch (e) {
    if (e instanceof GatewayError && !e.retryable) return e;
    return fail(0, "connection_failed", scrubSecrets(e instanceof Error ? e.message : String(e), secrets));
  }
  const text = await res.text().catch(() => "");
  if (res.ok) return answer(text, "exact");
  const raw = anthropicCodec.errorOf(res.status, text);
  // The lane's secret never leaves in the upstream's words (secret-scrub.ts).
  const info = { ...raw, message: scrubSecrets(raw.message, secrets), code: raw.code === undefined ? undefined : scrubSecrets(raw.code, secrets) };
  if (info.retryable || info.modelNotFound) return fail(res.status, info.code ?? `http_${res.status}`, info.message);
  return upstreamRejected(lane.provider, res.status, info.message, info.code);
}

export async function handleCountTokens(ctx: Ctx, rc: RequestContext): Promise<Response> {
  const key = await resolveRoutingKey(ctx, rc.request, true);
  const { body } = await readInferenceBody(rc.request, "chat", ctx.config.MAX_REQUEST_BYTES);
  if (key.lanes.length === 0) throw noProviders();
  // A request against the key's rate limits (no tokens): a key answering 429 makes no upstream call.
  const money = key.limits ? await MoneyCall.reserveFor(ctx, key, { requestId: rc.requestId, endpoint: "count_tokens" }, null, { requests: 1, tokens: 0 }) : null;
  try {
    return await countTokens(ctx, rc, key, body);
  } finally {
    money?.settle();
  }
}

async function countTokens(ctx: Ctx, rc: RequestContext, key: KeyContext, body: Json): Promise<Response> {
  const headers = forwardedHeaders("anthropic", rc.request);
  let last: LaneFailure | null = null;
  let tried = 0;
  for (const lane of key.lanes) {
    const adapter = getAdapter(lane.provider);
    if (!adapter || adapter.unavailable(lane) !== null || (adapter.kind === "api_key" && !lane.credential)) continue;
    if (!adapter.countTokens) return answer(JSON.stringify({ input_tokens: estimateInputTokens(body) }), "estimated");
    tried++;
    const r = await countOn(ctx, lane, body, headers, rc.request.signal);
    if (r instanceof Response) return r;
    if (r instanceof GatewayError) throw r;
    last = r;
  }
  throw allLanesFailed(tried, last);
}
