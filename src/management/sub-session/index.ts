// /v1/organizations/sub-session: connect (POST, SK), read (GET, AT) and disconnect (DELETE, SK)
// the subscription sign-in (SPEC "Sub session", CONTRACT §4).
import type { Elysia } from "elysia";
import { z } from "zod";
import type { Base } from "../../base.ts";
import type { Ctx } from "../../context.ts";
import { badRequest, GatewayError } from "../../errors.ts";
import { mount, MANAGEMENT, type Handler, type Method } from "../../http/route.ts";
import type { RouteDocs } from "../../http/openapi.ts";
import { authenticate } from "../guard.ts";
import { parseWith, readBody, readQuery } from "../zod-input.ts";
import { authJsonSchema, connectBody, getQuery, noQuery, type AuthJson } from "./model.ts";
import type { AdapterEnv } from "../../providers/env.ts";
import { tieredCatalog } from "../../providers/sub/catalog.ts";
import { forgetAuth } from "../../providers/sub/credentials.ts";
import { PROVISIONING_UNFINISHED, provisionSubHost } from "../../providers/sub/provision.ts";
import { connectSubSession, latestSubSession, NO_SUB_SESSION, presentSubSession, recordProvisioning, revokeSubSessions, subSessionAad } from "./store.ts";

const authJsonField = z.object({ auth_json: authJsonSchema });

/** The sign-in file, given as the parsed object or as its JSON text. */
function readAuthJson(value: unknown): AuthJson {
  if (value === undefined || value === null) throw badRequest("`auth_json` is required: send the parsed sign-in file of the subscription CLI (its auth.json) as an object.");
  let v = value;
  if (typeof v === "string") {
    try {
      v = JSON.parse(v);
    } catch {
      throw badRequest("`auth_json` must be the sign-in file as a JSON object; the string given is not valid JSON.");
    }
  }
  if (v === null || typeof v !== "object" || Array.isArray(v)) throw badRequest("`auth_json` must be the sign-in file as a JSON object.");
  return parseWith(authJsonField, { auth_json: v }).auth_json;
}

/** Seals before anything is stored or sent upstream: a failure leaves no trace (500 encrypt_failed). */
function sealAuth(ctx: Pick<Base, "secrets">, id: string, auth: AuthJson): string {
  try {
    return ctx.secrets.seal(JSON.stringify(auth), subSessionAad(id));
  } catch (e) {
    if (e instanceof GatewayError) throw e; // env_missing: no key configured
    throw new GatewayError(500, "Encrypting the uploaded sign-in failed; nothing was stored. Retry the request.", { code: "encrypt_failed" });
  }
}

/**
 * The live catalog of a connected session, each model with the tier alias it answers to. An
 * unreachable backend is reported in `models_error`, not as a failed call: the session is still there.
 */
async function catalogView(ctx: AdapterEnv, sessionId: string | null): Promise<{ models: Array<{ id: string; tier: string | null }>; models_error: string | null }> {
  if (!sessionId) return { models: [], models_error: null };
  try {
    return { models: await tieredCatalog(ctx, sessionId), models_error: null };
  } catch (e) {
    ctx.log.warn({ sessionId, err: e instanceof Error ? e.message : String(e) }, "sub catalog unavailable for the session view");
    return { models: [], models_error: "The subscription backend's model list could not be read just now; requests on the sub lane may fail over until it answers." };
  }
}

export function subSessionHandlers(ctx: Ctx): Partial<Record<Method, Handler>> {
  return {
    GET: async ({ request }) => {
      const { account } = await authenticate(ctx, request, { write: false });
      const q = readQuery(request, getQuery);
      const row = await latestSubSession(ctx.db, account.id);
      const view = row ? presentSubSession(row) : NO_SUB_SESSION;
      if (q.include !== "models") return view;
      return { ...view, ...(await catalogView(ctx, row && view.connected ? row.id : null)) };
    },
    POST: async ({ request }) => {
      const { account } = await authenticate(ctx, request, { write: true });
      readQuery(request, noQuery);
      const body = await readBody(ctx, request, connectBody);
      const auth = readAuthJson(body.auth_json);
      // Stored first: the check goes through the lane's token path, which may refresh and re-store the tokens.
      const stored = await connectSubSession(ctx, account.id, {
        seal: (id) => sealAuth(ctx, id, auth),
        sourcePath: body.source_path ?? null,
        expiresAt: body.ttl_seconds ? new Date(Date.now() + body.ttl_seconds * 1000) : null,
        provisioned: PROVISIONING_UNFINISHED.provisioned,
        accountStatus: PROVISIONING_UNFINISHED.accountStatus,
        lastError: PROVISIONING_UNFINISHED.lastError,
      });
      const id = stored.id;
      forgetAuth(ctx, id); // a reconnect keeps the id: this instance must not serve the old sign-in from its cache
      const p = await provisionSubHost(ctx, id);
      const row = await recordProvisioning(ctx, account.id, id, p);
      ctx.log.info({ accountId: account.id, subSessionId: id, provisioned: p.provisioned, accountStatus: p.accountStatus }, "sub session connected");
      return presentSubSession(row);
    },
    DELETE: async ({ request }) => {
      const { account } = await authenticate(ctx, request, { write: true });
      readQuery(request, noQuery);
      const n = await revokeSubSessions(ctx, account.id);
      if (n > 0) ctx.log.info({ accountId: account.id }, "sub session revoked");
      return { connected: false, status: "revoked" };
    },
  };
}

/** connectBody with the sign-in file's own schema in place of `unknown` (the handler reads it with authJsonSchema). */
const connectBodyDoc = connectBody.extend({
  auth_json: z.union([authJsonSchema, z.string().meta({ description: "The sign-in file's JSON text." })]),
});

export const subSessionDocs: RouteDocs = {
  GET: {
    summary: "The subscription sign-in's state", tag: "Sub session", auth: "account-read", query: getQuery,
    description: "`include=models` adds `models` (the live catalog, each with the tier alias it answers to) and `models_error` (why the catalog could not be read, or null).",
    responses: { "200": { description: "The sub session (or `connected: false`)." } },
  },
  POST: {
    summary: "Connect the subscription sign-in", tag: "Sub session", auth: "account-write", query: noQuery, body: connectBodyDoc,
    description: "Upload the subscription CLI's sign-in file (auth.json). It is stored encrypted and checked against the backend.",
    responses: { "200": { description: "The sub session." } },
  },
  DELETE: { summary: "Disconnect the subscription sign-in", tag: "Sub session", auth: "account-write", query: noQuery, responses: { "200": { description: "`{connected: false, status: \"revoked\"}`" } } },
};

export function subSessionRoutes(ctx: Ctx, app: Elysia): void {
  mount(ctx, app, "/v1/organizations/sub-session", subSessionHandlers(ctx), MANAGEMENT, subSessionDocs);
}
