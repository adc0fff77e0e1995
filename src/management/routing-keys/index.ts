// /v1/organizations/routing-keys: create (POST, SK), list (GET, AT, `?include=lanes`) and change
// (PATCH ?id=, SK) routing keys (SPEC "Routing key", "Lane", PATCH body; CONTRACT §6 and §8).
import type { Elysia } from "elysia";
import type { Ctx } from "../../context.ts";
import { mount, MANAGEMENT, type Handler, type Method } from "../../http/route.ts";
import type { RouteDocs } from "../../http/openapi.ts";
import { authenticate } from "../guard.ts";
import { readBody, readQuery } from "../zod-input.ts";
import { createRoutingKeyBody, idQuery, listQuery, noQuery, patchRoutingKeyBody } from "./model.ts";
import { createRoutingKey, listRoutingKeys, patchRoutingKey, presentRoutingKey, wireableLanes, type CooldownOf } from "./service.ts";

/** The lanes of a routing key as the API answers them (documented for cooldown_until; the other fields are SPEC's Lane table). */
const LANES_SCHEMA = {
  type: "array",
  items: {
    type: "object",
    properties: {
      provider: { type: "string" },
      model: { type: ["string", "null"] },
      cooldown_until: {
        type: ["string", "null"], format: "date-time",
        description: "When the lane's cooldown ends (ISO time): it kept failing for a retryable cause and every instance skips it until then. null when it is not cooling.",
      },
    },
  },
};
const KEY_SCHEMA = { type: "object", properties: { id: { type: "string" }, label: { type: "string" }, providers: LANES_SCHEMA } };

export function routingKeyHandlers(ctx: Ctx): Partial<Record<Method, Handler>> {
  // CONTRACT §9: each lane says when its cooldown ends, as this instance knows it (the same view as GET /v1/key).
  const cooldownOf: CooldownOf = (l) => ctx.services.cooldowns.untilOf(l);
  return {
    GET: async ({ request }) => {
      const { account } = await authenticate(ctx, request, { write: false });
      const q = readQuery(request, listQuery);
      const rows = await listRoutingKeys(ctx.db, account.id);
      const routing_keys = await Promise.all(rows.map((r) => presentRoutingKey(ctx, r, cooldownOf)));
      if (q.include === "lanes") return { routing_keys, lanes: await wireableLanes(ctx.db, account.id) };
      return { routing_keys };
    },
    POST: async ({ request }) => {
      const { account } = await authenticate(ctx, request, { write: true });
      readQuery(request, noQuery);
      // Every field is optional: a bare POST creates a default key.
      const body = await readBody(ctx, request, createRoutingKeyBody, { allowEmpty: true });
      const { row, raw } = await createRoutingKey(ctx, account.id, body);
      ctx.log.info({ accountId: account.id, routingKeyId: row.id, keyPrefix: row.keyPrefix, lanes: row.lanes.length }, "routing key created");
      return { routing_key: await presentRoutingKey(ctx, row, cooldownOf), raw_key: raw };
    },
    PATCH: async ({ request }) => {
      const { account } = await authenticate(ctx, request, { write: true });
      const { id } = readQuery(request, idQuery);
      const body = await readBody(ctx, request, patchRoutingKeyBody);
      const { row, raw } = await patchRoutingKey(ctx, account.id, id, body);
      ctx.log.info({ accountId: account.id, routingKeyId: row.id, keyPrefix: row.keyPrefix, fields: Object.keys(body) }, "routing key changed");
      // SPEC: "200: updated routing key". The object's fields are at the top level, and the same
      // object is under `routing_key` as in the POST answer, so clients of either reading work.
      const routing_key = await presentRoutingKey(ctx, row, cooldownOf);
      return raw === undefined ? { ...routing_key, routing_key } : { ...routing_key, routing_key, raw_key: raw };
    },
  };
}

export const routingKeyDocs: RouteDocs = {
  GET: {
    summary: "List routing keys", tag: "Routing keys", auth: "account-read", query: listQuery,
    description: "`?include=lanes` adds the lanes this account can wire (saved keys, sub session, bridges).",
    responses: { "200": { description: "`{routing_keys: [...]}` (and `lanes` with ?include=lanes). Each key's `providers` lanes carry `cooldown_until`.", schema: { type: "object", properties: { routing_keys: { type: "array", items: KEY_SCHEMA } } } } },
  },
  POST: {
    summary: "Create a routing key", tag: "Routing keys", auth: "account-write", query: noQuery, body: createRoutingKeyBody, bodyOptional: true,
    description: "Every field is optional: a bare POST creates a default key. The raw key (gw_…) is shown once.",
    responses: { "200": { description: "`{routing_key, raw_key}`", schema: { type: "object", properties: { routing_key: KEY_SCHEMA, raw_key: { type: "string" } } } } },
  },
  PATCH: {
    summary: "Change a routing key", tag: "Routing keys", auth: "account-write", query: idQuery, body: patchRoutingKeyBody,
    description: "The key's id goes in the query: `PATCH /v1/organizations/routing-keys?id=rk_…`. `regenerate: true` returns a new raw key.",
    responses: { "200": { description: "The updated routing key (also under `routing_key`).", schema: { ...KEY_SCHEMA, properties: { ...KEY_SCHEMA.properties, routing_key: KEY_SCHEMA } } } },
  },
};

export function routingKeyRoutes(ctx: Ctx, app: Elysia): void {
  mount(ctx, app, "/v1/organizations/routing-keys", routingKeyHandlers(ctx), MANAGEMENT, routingKeyDocs);
}
