// Provisioning on connect (CONTRACT §4): the stored sign-in is checked against the subscription
// backend's live catalog, GET {SUB_API_BASE_URL}/models. The check runs after the sign-in is
// stored and goes through the sub lane's own token path: an access token that already expired is
// refreshed first, and a 401 refreshes and retries once, so a sign-in file that sat on disk for a
// while still provisions, and the refreshed tokens are stored sealed like any refresh.
// A 2xx listing at least one model means the lane can serve (`provisioned: true,
// account_status: "active"`); anything else leaves `provisioned: false` and a `last_error` that
// says why and what to do.
import type { AdapterEnv } from "../env.ts";
import { GatewayError } from "../../errors.ts";
import { accessTokenExpired, subAuthHeaders, type SubAuthFile } from "./auth-file.ts";
import { subUrl } from "./client.ts";
import { currentAuth, refreshAuth } from "./credentials.ts";
import { MAX_UPSTREAM_SMALL_BYTES, readJsonCapped } from "../../net/read-capped.ts";

export interface Provisioning {
  provisioned: boolean;
  /** `active`, `unauthorized` (the backend refused the sign-in) or `unavailable` (it could not say). */
  accountStatus: "active" | "unauthorized" | "unavailable";
  lastError: string | null;
}

/** What a stored session reads as until its check finishes (and stays if the check never does). */
export const PROVISIONING_UNFINISHED: Provisioning = {
  provisioned: false,
  accountStatus: "unavailable",
  lastError: "The sign-in is stored but checking it against the subscription backend did not finish. Connect again to retry.",
};

const TIMEOUT_MS = 15_000;

function modelCount(body: unknown): number | null {
  if (body === null || typeof body !== "object") return null;
  const b = body as { data?: unknown; models?: unknown };
  if (Array.isArray(b.data)) return b.data.length;
  if (Array.isArray(b.models)) return b.models.length;
  return null;
}

/** A refresh that failed: refused for good means the sign-in is dead; anything else may pass. */
function refreshFailed(ctx: AdapterEnv, sessionId: string, e: unknown, before: string): Provisioning {
  if (!(e instanceof GatewayError)) throw e;
  const refused = ctx.services.subLanes.refreshRefused.has(sessionId);
  const why = e.message.charAt(0).toLowerCase() + e.message.slice(1);
  return { provisioned: false, accountStatus: refused ? "unauthorized" : "unavailable", lastError: `${before}${why}` };
}

function unreachable(e: unknown): Provisioning {
  const timedOut = e instanceof Error && (e.name === "TimeoutError" || e.name === "AbortError");
  return {
    provisioned: false,
    accountStatus: "unavailable",
    lastError: timedOut
      ? `The subscription backend did not answer within ${TIMEOUT_MS / 1000} s; the sign-in is stored. Connect again later to retry.`
      : "The subscription backend could not be reached; the sign-in is stored. Connect again later to retry.",
  };
}

/** Checks the stored sign-in of `sessionId` against the live catalog. Never throws for upstream trouble. */
export async function provisionSubHost(ctx: AdapterEnv, sessionId: string): Promise<Provisioning> {
  const signal = AbortSignal.timeout(TIMEOUT_MS);
  const list = (auth: SubAuthFile) =>
    fetch(subUrl(ctx, "/models"), { headers: { ...subAuthHeaders(auth), accept: "application/json" }, redirect: "manual", signal });

  let auth: SubAuthFile;
  try {
    auth = await currentAuth(ctx, sessionId);
  } catch (e) {
    // Replaced by a newer connect meanwhile: its sign-in is gone.
    if (!(e instanceof GatewayError)) throw e;
    return { provisioned: false, accountStatus: "unavailable", lastError: e.message };
  }
  if (accessTokenExpired(auth)) {
    try {
      auth = await refreshAuth(ctx, sessionId, auth.tokens.access_token, signal);
    } catch (e) {
      if (signal.aborted) return unreachable(signal.reason);
      return refreshFailed(ctx, sessionId, e, "The access token in the sign-in has expired and ");
    }
  }
  let res: Response;
  try {
    res = await list(auth);
    if (res.status === 401) {
      await res.body?.cancel().catch(() => {});
      try {
        auth = await refreshAuth(ctx, sessionId, auth.tokens.access_token, signal);
      } catch (e) {
        if (signal.aborted) return unreachable(signal.reason);
        return refreshFailed(ctx, sessionId, e, "The subscription backend refused this sign-in (HTTP 401) and ");
      }
      res = await list(auth);
    }
  } catch (e) {
    return unreachable(e);
  }
  if (res.status === 401 || res.status === 403) {
    await res.body?.cancel().catch(() => {});
    return {
      provisioned: false,
      accountStatus: "unauthorized",
      lastError: `The subscription backend refused this sign-in (HTTP ${res.status}). Sign in again with the subscription CLI and upload the fresh auth.json.`,
    };
  }
  if (res.status < 200 || res.status > 299) {
    await res.body?.cancel().catch(() => {});
    return {
      provisioned: false,
      accountStatus: "unavailable",
      lastError: `The subscription backend answered HTTP ${res.status} when listing models; the sign-in is stored. Connect again later to retry.`,
    };
  }
  let count: number | null = null;
  try {
    count = modelCount(await readJsonCapped(res, MAX_UPSTREAM_SMALL_BYTES));
  } catch {
    count = null;
  }
  if (count === null) {
    return { provisioned: false, accountStatus: "unavailable", lastError: "The subscription backend's model list was not readable; the sign-in is stored. Connect again later to retry." };
  }
  if (count === 0) {
    return { provisioned: false, accountStatus: "unavailable", lastError: "The subscription backend lists no models for this sign-in; check that the subscription is active, then connect again." };
  }
  return { provisioned: true, accountStatus: "active", lastError: null };
}
