// POST /v1/messages/count_tokens: the input tokens of a Messages request, as Anthropic's endpoint
// answers ({"input_tokens": n}). The key's lanes are walked in order by the one upstream executor
// (lane-runner.ts, attempt.ts: the upstream timeout, the abort tied to the client, secret
// scrubbing, failure classification and fallback, as for every call that leaves the gateway), the
// operation being a count (RelayRequest.count): a lane whose vendor counts exactly
// (adapter.countTokens: Anthropic) gets the request forwarded with the client's
// anthropic-version/beta, answered `x-token-count: exact`; the first lane that serves but cannot
// count answers with the relay's estimate (about 4 bytes of the request's system, messages and
// tools JSON per token), marked `x-token-count: estimated`. A lane that fails (connection, 429,
// 5xx, its own key) moves on; an upstream 4xx about the request goes back to the client. Counting
// is free at Anthropic: no budget is reserved and no usage record is written; a key with rate
// limits counts it as one request without tokens.
import type { RelayDeps } from "./relay-deps.ts";
import { GatewayError } from "../errors.ts";
import type { RequestContext } from "../http/route.ts";
import type { Json } from "../protocols/types.ts";
import type { LaneResult, RelayRequest } from "./attempt.ts";
import { resolveRoutingKey } from "./auth.ts";
import { MoneyCall } from "../money/money.ts";
import { forwardedHeaders } from "./client-headers.ts";
import { LaneRunner } from "./lane-runner.ts";
import { noProviders } from "./relay-errors.ts";
import { readInferenceBody } from "./request-body.ts";

/** The documented estimate: a quarter token per byte of what the model reads. */
export function estimateInputTokens(body: Json): number {
  const read = JSON.stringify([body.system ?? null, body.messages ?? [], body.tools ?? null]);
  return Math.max(1, Math.ceil(Buffer.byteLength(read, "utf8") / 4));
}

const answer = (body: string, kind: "exact" | "estimated") =>
  new Response(body, { status: 200, headers: { "content-type": "application/json", "x-token-count": kind } });

export async function handleCountTokens(ctx: RelayDeps, rc: RequestContext): Promise<Response> {
  const key = await resolveRoutingKey(ctx, rc.request, true);
  const { body } = await readInferenceBody(rc.request, "chat", ctx.config.MAX_REQUEST_BYTES);
  if (key.lanes.length === 0) throw noProviders();
  const opts = { requestId: rc.requestId, endpoint: "count_tokens" };
  rc.access.endpoint = "count_tokens";
  // A request against the key's rate limits (no tokens): a key answering 429 makes no upstream call.
  const money = key.limits ? await MoneyCall.reserveFor(ctx, key, opts, null, { requests: 1, tokens: 0 }) : MoneyCall.free(ctx, key, opts);
  const rr: RelayRequest = {
    ctx, key, endpoint: "count_tokens", shape: "anthropic", body, bytes: 0, stream: false, model: String(body.model),
    requestId: rc.requestId, signal: rc.request.signal, money, access: rc.access,
    clientHeaders: forwardedHeaders("anthropic", rc.request), count: true,
  };
  let r: LaneResult;
  try {
    r = await new LaneRunner(rr, key.lanes).next();
  } finally {
    money.settle();
  }
  switch (r.kind) {
    case "body":
      return answer(r.text, "exact");
    case "uncounted":
      return answer(JSON.stringify({ input_tokens: estimateInputTokens(body) }), "estimated");
    case "aborted":
      return new Response(null, { status: 499 });
    case "client":
      throw r.error;
    default:
      throw new GatewayError(502, "The token count got an answer the gateway cannot relay; retry the request.", { code: "upstream_error" });
  }
}
