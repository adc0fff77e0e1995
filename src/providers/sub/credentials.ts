// The sub lane's credentials: the stored sign-in, decrypted and cached briefly, and the token
// refresh (CONTRACT §4).
//
// Refresh is single-flight. Within a gateway, every request that finds the token expired (or got
// a 401) for a session awaits ONE promise. Across gateway instances sharing the KV, a short lock
// (`gw:sub-refresh:<session id>`) lets one instance call the auth server while the others watch
// the store for the new tokens. This matters beyond saving a call: refresh tokens rotate, and a
// second refresh with the same (now used) refresh token is refused by the auth server, which
// would break the sign-in.
//
// The request matches the subscription CLI's own refresh: POST {SUB_AUTH_BASE_URL}/oauth/token,
// JSON body {client_id, grant_type: "refresh_token", refresh_token, scope: "openid profile email"}.
import type { AdapterEnv } from "../env.ts";
import { accessTokenExpired, withRefreshedTokens, type AuthJson, type SubAuthFile } from "./auth-file.ts";
import { loadSubAuth, saveSubAuth } from "./sign-in-store.ts";
import { laneFailure } from "./failure.ts";
import { AUTH_CACHE_MS, REFRESH_REFUSED_MS } from "./state.ts";
import { MAX_UPSTREAM_SMALL_BYTES, readTextCapped } from "../../net/read-capped.ts";

/** The subscription CLI's public OAuth client id (its refresh grants carry it). */
export const SUB_OAUTH_CLIENT_ID = "app_EMoamEEZ73f0CkXaXp7hrann";
const REFRESH_SCOPE = "openid profile email";
const REFRESH_TIMEOUT_MS = 20_000;
const LOCK_TTL_SECONDS = 30;
const LOCK_POLL_MS = 100;

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Reads the sign-in from the store, bypassing the cache, and caches it. */
async function readStored(ctx: AdapterEnv, sessionId: string): Promise<SubAuthFile | null> {
  const auth = (await loadSubAuth(ctx, sessionId)) as SubAuthFile | null;
  const st = ctx.services.subLanes;
  if (auth) st.auth.set(sessionId, { auth, at: Date.now() });
  else st.auth.delete(sessionId);
  return auth;
}

/** The session's sign-in (cached for a few seconds). A missing one is a lane failure. */
export async function currentAuth(ctx: AdapterEnv, sessionId: string): Promise<SubAuthFile> {
  const hit = ctx.services.subLanes.auth.get(sessionId);
  if (hit && Date.now() - hit.at < AUTH_CACHE_MS) return hit.auth;
  const auth = await readStored(ctx, sessionId);
  if (!auth) throw laneFailure("The subscription sign-in is no longer stored; connect it again with POST /v1/organizations/sub-session.");
  return auth;
}

/** Forgets the cached sign-in (after a disconnect or reconnect on this instance). */
export function forgetAuth(ctx: AdapterEnv, sessionId: string): void {
  ctx.services.subLanes.auth.delete(sessionId);
  ctx.services.subLanes.catalog.delete(sessionId);
}

/** A sign-in whose access token is expired is refreshed first; otherwise it is returned as is. */
export async function usableAuth(ctx: AdapterEnv, sessionId: string, signal?: AbortSignal): Promise<SubAuthFile> {
  const auth = await currentAuth(ctx, sessionId);
  if (!accessTokenExpired(auth)) return auth;
  return refreshAuth(ctx, sessionId, auth.tokens.access_token, signal);
}

/**
 * New tokens for the session, replacing `staleAccessToken` (the one that expired or got a 401).
 * When another request or instance already replaced it, its result is used and no refresh is
 * made. `signal` only stops this caller's wait; the shared refresh runs to its end.
 */
export function refreshAuth(ctx: AdapterEnv, sessionId: string, staleAccessToken: string, signal?: AbortSignal): Promise<SubAuthFile> {
  const st = ctx.services.subLanes;
  // The refusal is remembered for the sign-in that was refused only: a reconnect keeps the
  // session id but brings new tokens, which must be tried at once.
  const refused = st.refreshRefused.get(sessionId);
  if (refused && refused.until > Date.now() && refused.stale === staleAccessToken) return Promise.reject(laneFailure(refused.message));
  let p = st.refreshing.get(sessionId);
  if (!p) {
    p = refreshAcrossInstances(ctx, sessionId, staleAccessToken).finally(() => st.refreshing.delete(sessionId));
    st.refreshing.set(sessionId, p);
  }
  return signal ? abortable(p, signal) : p;
}

function abortable<T>(p: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    p.then(
      (v) => { signal.removeEventListener("abort", onAbort); resolve(v); },
      (e) => { signal.removeEventListener("abort", onAbort); reject(e); },
    );
  });
}

/** Is this sign-in already newer than the token that failed? */
function replaced(auth: SubAuthFile, stale: string): boolean {
  return auth.tokens.access_token !== stale && !accessTokenExpired(auth);
}

async function refreshAcrossInstances(ctx: AdapterEnv, sessionId: string, stale: string): Promise<SubAuthFile> {
  const lockKey = `gw:sub-refresh:${sessionId}`;
  const deadline = Date.now() + REFRESH_TIMEOUT_MS + LOCK_TTL_SECONDS * 1000;
  for (;;) {
    // INCR with a TTL is the lock: the caller that brings it to 1 holds it; the TTL frees it if
    // that instance dies mid-refresh.
    if ((await ctx.kv.incrWindow(lockKey, LOCK_TTL_SECONDS)) === 1) {
      try {
        return await refreshHoldingLock(ctx, sessionId, stale);
      } finally {
        await ctx.kv.del(lockKey).catch(() => {});
      }
    }
    await sleep(LOCK_POLL_MS);
    const now = await readStored(ctx, sessionId);
    if (!now) throw laneFailure("The subscription sign-in was removed; connect it again with POST /v1/organizations/sub-session.");
    if (replaced(now, stale)) return now;
    if (Date.now() > deadline) throw laneFailure("Refreshing the subscription sign-in took too long; retry the request.");
  }
}

async function refreshHoldingLock(ctx: AdapterEnv, sessionId: string, stale: string): Promise<SubAuthFile> {
  // Double-check under the lock: another instance may have finished just before we got it.
  const auth = await readStored(ctx, sessionId);
  if (!auth) throw laneFailure("The subscription sign-in was removed; connect it again with POST /v1/organizations/sub-session.");
  if (replaced(auth, stale)) return auth;

  let res: Response;
  try {
    res = await fetch(`${ctx.config.SUB_AUTH_BASE_URL}/oauth/token`, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json" },
      body: JSON.stringify({
        client_id: SUB_OAUTH_CLIENT_ID,
        grant_type: "refresh_token",
        refresh_token: auth.tokens.refresh_token,
        scope: REFRESH_SCOPE,
      }),
      redirect: "manual",
      signal: AbortSignal.timeout(REFRESH_TIMEOUT_MS),
    });
  } catch (e) {
    ctx.log.warn({ sessionId, err: e instanceof Error ? e.name : "error" }, "sub sign-in refresh unreachable");
    throw laneFailure("The subscription sign-in could not be refreshed: the auth server was unreachable. Retry in a moment.");
  }
  const text = await readTextCapped(res, MAX_UPSTREAM_SMALL_BYTES).catch(() => "");
  if (!res.ok) {
    const code = refreshErrorCode(text);
    ctx.log.warn({ sessionId, status: res.status, code }, "sub sign-in refresh refused");
    if (res.status === 400 || res.status === 401 || res.status === 403) {
      const message = `The subscription sign-in could not be refreshed (${code ?? `status ${res.status}`}); sign in again with the subscription CLI and upload the new sign-in file with POST /v1/organizations/sub-session.`;
      ctx.services.subLanes.refreshRefused.set(sessionId, { message, until: Date.now() + REFRESH_REFUSED_MS, stale });
      throw laneFailure(message);
    }
    throw laneFailure(`The subscription sign-in could not be refreshed: the auth server answered ${res.status}. Retry in a moment.`);
  }
  let grant: Record<string, unknown>;
  try {
    grant = JSON.parse(text);
  } catch {
    throw laneFailure("The subscription sign-in could not be refreshed: the auth server's answer was not JSON.");
  }
  if (typeof grant.access_token !== "string" || !grant.access_token) {
    throw laneFailure("The subscription sign-in could not be refreshed: the auth server returned no access token.");
  }
  const next = withRefreshedTokens(auth, grant);
  if (!(await saveSubAuth(ctx, sessionId, next as AuthJson))) {
    ctx.services.subLanes.auth.delete(sessionId);
    throw laneFailure("The subscription sign-in was disconnected while it was being refreshed; connect it again with POST /v1/organizations/sub-session.");
  }
  ctx.services.subLanes.auth.set(sessionId, { auth: next, at: Date.now() });
  ctx.log.info({ sessionId }, "sub sign-in refreshed");
  return next;
}

/** The error code of a refused refresh (`refresh_token_reused`…), never the body itself. */
function refreshErrorCode(text: string): string | null {
  try {
    const v = JSON.parse(text);
    const code = typeof v?.error === "object" ? v.error?.code : typeof v?.error === "string" ? v.error : v?.code;
    return typeof code === "string" && /^[\w.-]{1,64}$/.test(code) ? code : null;
  } catch {
    return null;
  }
}
