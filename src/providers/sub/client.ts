// Calls to the subscription backend with the session's tokens: an expired access token is
// refreshed before the call, and a 401 answer refreshes and retries the call once (CONTRACT §4).
import type { AdapterEnv } from "../env.ts";
import { subAuthHeaders, type SubAuthFile } from "./auth-file.ts";
import { refreshAuth, usableAuth } from "./credentials.ts";
import { laneFailure } from "./failure.ts";
import { MAX_UPSTREAM_ANSWER_BYTES, readJsonCapped } from "../../net/read-capped.ts";

export interface SubCall {
  method: "GET" | "POST";
  /** Full URL under SUB_API_BASE_URL (see subUrl). */
  url: string;
  /** Headers besides the auth ones. */
  headers?: Record<string, string>;
  /** A body the retry can send again: a string, or a factory for a fresh stream. */
  body?: string | (() => NonNullable<RequestInit["body"]>);
  signal?: AbortSignal;
}

function send(auth: SubAuthFile, call: SubCall): Promise<Response> {
  const body = typeof call.body === "function" ? call.body() : call.body;
  const init: RequestInit & { duplex?: "half" } = {
    method: call.method,
    headers: { ...call.headers, ...subAuthHeaders(auth) },
    body,
    redirect: "manual",
    signal: call.signal,
  };
  if (body instanceof ReadableStream) init.duplex = "half";
  return fetch(call.url, init);
}

/** `{SUB_API_BASE_URL}{path}`. */
export const subUrl = (ctx: AdapterEnv, path: string) => `${ctx.config.SUB_API_BASE_URL}${path}`;

/**
 * Sends `call` with the session's current tokens. Connection failures propagate (the relay treats
 * them as lane failures); a 401 after a refresh is returned as is.
 */
export async function subFetch(ctx: AdapterEnv, sessionId: string, call: SubCall): Promise<Response> {
  const auth = await usableAuth(ctx, sessionId, call.signal);
  const res = await send(auth, call);
  if (res.status !== 401) return res;
  await res.body?.cancel().catch(() => {});
  const fresh = await refreshAuth(ctx, sessionId, auth.tokens.access_token, call.signal);
  return send(fresh, call);
}

/** subFetch for calls the gateway makes for itself (catalog): any non-2xx is a lane failure. */
export async function subJson(ctx: AdapterEnv, sessionId: string, path: string, signal?: AbortSignal): Promise<unknown> {
  let res: Response;
  try {
    res = await subFetch(ctx, sessionId, { method: "GET", url: subUrl(ctx, path), headers: { accept: "application/json" }, signal: signal ?? AbortSignal.timeout(15_000) });
  } catch (e) {
    if (e instanceof Error && e.name === "GatewayError") throw e;
    throw laneFailure(`The subscription backend could not be reached for ${path}.`);
  }
  if (!res.ok) {
    await res.body?.cancel().catch(() => {});
    throw laneFailure(`The subscription backend answered ${res.status} for ${path}.`);
  }
  try {
    return await readJsonCapped(res, MAX_UPSTREAM_ANSWER_BYTES);
  } catch {
    throw laneFailure(`The subscription backend's answer for ${path} was not JSON.`);
  }
}
