// The `sub` lane: serves through the account's connected subscription sign-in (CONTRACT §4).
// It speaks the Responses protocol to `{SUB_API_BASE_URL}/responses` with the stored access token
// and account id; the relay translates chat requests to it and back, and passes Responses
// requests through untouched. Tier aliases resolve against the live catalog at request time.
// Seat traffic: priced, excluded from a key's budget while budget_excludes_seats.
import type { Json, WireProtocol } from "../../protocols/types.ts";
import type { ProviderAdapter, ResolvedLane, UpstreamCall } from "../types.ts";
import { within } from "../../lib/time.ts";
import { liveCatalog, pickTier, resolveSubModel, SUB_CATALOG_ALIASES } from "./catalog.ts";
import { subFetch, subUrl } from "./client.ts";
import { laneFailure } from "./failure.ts";
import { applySubSettings } from "./settings.ts";
import { CATALOG_LIST_WAIT_MS } from "./state.ts";

/** Why the lane's session cannot serve now, or null. */
export function subUnavailable(lane: ResolvedLane, now = Date.now()): string | null {
  const s = lane.subSession;
  if (!s) return "The sub lane's subscription sign-in is not connected; connect one with POST /v1/organizations/sub-session.";
  if (s.status !== "connected") {
    return `The subscription sign-in is ${s.status}${s.lastError ? ` (${s.lastError})` : ""}; connect it again with POST /v1/organizations/sub-session.`;
  }
  const expiresAt = (s as { expiresAt?: Date | string | null }).expiresAt;
  if (expiresAt && new Date(expiresAt).getTime() <= now) {
    return "The subscription sign-in expired (its ttl_seconds passed); connect it again with POST /v1/organizations/sub-session.";
  }
  if (!s.provisioned) {
    return `The subscription sign-in is stored but its serving backend is not prepared${s.lastError ? `: ${s.lastError}` : ""}. Connect it again once the issue is resolved.`;
  }
  return null;
}

export const subAdapter: ProviderAdapter = {
  id: "sub",
  kind: "sub",
  protocols: ["responses"] as const,
  seat: true,
  // The subscription serves OpenAI's models: seat traffic is priced from their catalog entries.
  pricingId: "openai",
  catalogAliases: SUB_CATALOG_ALIASES,
  settings: ["reasoning_effort", "verbosity", "service_tier"],

  unavailable: (lane) => subUnavailable(lane),

  /**
   * GET /v1/models: the lane's model, the session's live catalog (the request's model goes first on
   * every lane, so a lane that names a model still serves the catalog) and the tier aliases
   * `flagship`, `mini`, `sub/flagship`, `sub/mini` the catalog lets resolve (CONTRACT §8
   * Subscription tiers). Nothing while the session cannot serve; only the lane's model while the
   * catalog cannot be read within CATALOG_LIST_WAIT_MS (its fetch goes on and fills the cache).
   */
  async models(ctx, lane) {
    if (subUnavailable(lane) !== null) return [];
    const ids = lane.model ? [lane.model] : [];
    const entries = await within(liveCatalog(ctx, lane.subSession!.id), CATALOG_LIST_WAIT_MS);
    if (!entries) return ids;
    for (const e of entries) ids.push(e.id);
    for (const tier of ["flagship", "mini"] as const) if (pickTier(entries, tier) !== null) ids.push(tier, `sub/${tier}`);
    return ids;
  },

  applySettings(body: Json, lane: ResolvedLane, protocol: WireProtocol) {
    if (protocol === "responses") applySubSettings(body, lane);
  },

  async prepare({ ctx, lane, body, model, stream }): Promise<UpstreamCall> {
    const sessionId = lane.subSession!.id;
    body.model = await resolveSubModel(ctx, sessionId, model);
    // The subscription backend keeps no conversation state for API-style callers.
    if (body.store === undefined) body.store = false;
    return {
      url: subUrl(ctx, "/responses"),
      headers: { "content-type": "application/json", accept: stream ? "text/event-stream" : "application/json" },
      body: JSON.stringify(body),
    };
  },

  async send(ctx, lane, call, signal) {
    const res = await subFetch(ctx, lane.subSession!.id, { method: "POST", url: call.url, headers: call.headers, body: call.body, signal });
    // Still refused after a refresh: the sign-in is the problem, not the client's request.
    if (res.status === 401 || res.status === 403) {
      await res.body?.cancel().catch(() => {});
      throw laneFailure(`The subscription backend refused the sign-in (HTTP ${res.status}) even after a token refresh; sign in again with the subscription CLI and upload the new sign-in file with POST /v1/organizations/sub-session.`);
    }
    return res;
  },

  /** POST /v1/audio/transcriptions: the multipart body streamed to the backend's own endpoint (CONTRACT §4). */
  transcribe(ctx, lane, call) {
    return subFetch(ctx, lane.subSession!.id, {
      method: "POST",
      url: subUrl(ctx, "/audio/transcriptions"),
      headers: { "content-type": call.contentType, accept: call.accept },
      body: call.body,
      signal: call.signal,
    });
  },
};
