// Provisioning on connect (CONTRACT §4): the uploaded sign-in is checked against the subscription
// backend's live catalog, GET {SUB_API_BASE_URL}/models. A 2xx listing at least one model means
// the lane can serve (`provisioned: true, account_status: "active"`); anything else is stored
// with `provisioned: false` and a `last_error` that says why and what to do.
import type { Ctx } from "../../context.ts";
import type { AuthJson } from "./model.ts";

export interface Provisioning {
  provisioned: boolean;
  /** `active`, `unauthorized` (the backend refused the sign-in) or `unavailable` (it could not say). */
  accountStatus: "active" | "unauthorized" | "unavailable";
  lastError: string | null;
}

const TIMEOUT_MS = 15_000;

function modelCount(body: unknown): number | null {
  if (body === null || typeof body !== "object") return null;
  const b = body as { data?: unknown; models?: unknown };
  if (Array.isArray(b.data)) return b.data.length;
  if (Array.isArray(b.models)) return b.models.length;
  return null;
}

export async function provisionSubHost(ctx: Ctx, auth: AuthJson): Promise<Provisioning> {
  const headers: Record<string, string> = {
    authorization: `Bearer ${auth.tokens.access_token}`,
    accept: "application/json",
  };
  if (auth.tokens.account_id) headers["chatgpt-account-id"] = auth.tokens.account_id;
  let res: Response;
  try {
    res = await fetch(`${ctx.config.SUB_API_BASE_URL}/models`, { headers, redirect: "manual", signal: AbortSignal.timeout(TIMEOUT_MS) });
  } catch (e) {
    const timedOut = e instanceof Error && (e.name === "TimeoutError" || e.name === "AbortError");
    return {
      provisioned: false,
      accountStatus: "unavailable",
      lastError: timedOut
        ? `The subscription backend did not answer within ${TIMEOUT_MS / 1000} s; the sign-in is stored. Connect again later to retry.`
        : "The subscription backend could not be reached; the sign-in is stored. Connect again later to retry.",
    };
  }
  if (res.status === 401 || res.status === 403) {
    await res.body?.cancel();
    return {
      provisioned: false,
      accountStatus: "unauthorized",
      lastError: `The subscription backend refused this sign-in (HTTP ${res.status}). Sign in again with the subscription CLI and upload the fresh auth.json.`,
    };
  }
  if (res.status < 200 || res.status > 299) {
    await res.body?.cancel();
    return {
      provisioned: false,
      accountStatus: "unavailable",
      lastError: `The subscription backend answered HTTP ${res.status} when listing models; the sign-in is stored. Connect again later to retry.`,
    };
  }
  let count: number | null = null;
  try {
    count = modelCount(await res.json());
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
