// The one way API-key lanes speaking the OpenAI protocol reach their vendor: a bearer-authorised
// JSON POST. The saved key is decrypted lazily on the first call of a lane and kept on the
// resolved lane (under a symbol, so no JSON or log ever shows it) until the key cache drops it.
import type { AdapterEnv } from "../env.ts";
import { GatewayError } from "../../errors.ts";
import type { ResolvedLane, UpstreamCall } from "../types.ts";

const PLAIN_KEY = Symbol("decrypted provider key");

export function apiKeyOf(ctx: AdapterEnv, lane: ResolvedLane): string {
  const cached = (lane as unknown as Record<symbol, string | undefined>)[PLAIN_KEY];
  if (cached !== undefined) return cached;
  const c = lane.credential;
  if (!c) throw new GatewayError(502, `The ${lane.provider} lane has no saved API key; save one with POST /v1/organizations/credentials and rewire the key.`, { code: "no_credential", retryable: true });
  let key: string;
  try {
    key = ctx.secrets.open(c.apiKeyCiphertext, `credentials:${c.id}`);
  } catch (e) {
    if (e instanceof GatewayError) throw e; // env_missing
    throw new GatewayError(502, `The ${lane.provider} lane's saved API key could not be decrypted; save it again.`, { code: "upstream_error", retryable: true });
  }
  Object.defineProperty(lane, PLAIN_KEY, { value: key, enumerable: false });
  return key;
}

export function bearerCall(url: string, apiKey: string, body: string, stream: boolean): UpstreamCall {
  return {
    url,
    headers: {
      authorization: `Bearer ${apiKey}`,
      "content-type": "application/json",
      accept: stream ? "text/event-stream" : "application/json",
    },
    body,
  };
}

/** The POST of a JSON call, through Bun's fetch (bench/PROFILE.md lever 3: why not a client of our own). */
export function postJson(_ctx: AdapterEnv, call: UpstreamCall, signal: AbortSignal): Promise<Response> {
  return fetch(call.url, { method: "POST", headers: call.headers, body: call.body, signal });
}
