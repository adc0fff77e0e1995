// GET /v1/organizations/usage (AT): the account's 30-day usage summary (CONTRACT §6), and the
// read endpoints the dashboard is built on, open to scripts too: usage grouped by day, key, lane,
// model or tag (/usage/groups) and the latest records (/usage/records). Same guard, same order of
// checks (CONTRACT §8): 405 → 401 → 410 → 402 → 400.
import type { Elysia } from "elysia";
import type { Ctx } from "../../context.ts";
import { mount, MANAGEMENT, type Handler, type Method } from "../../http/route.ts";
import type { RouteDocs } from "../../http/openapi.ts";
import { authenticate } from "../guard.ts";
import { readQuery } from "../zod-input.ts";
import { groupsQuery, noQuery, recordsQuery } from "./model.ts";
import { usageRecordsPage } from "./records.ts";
import { usageGroups } from "./report.ts";
import { usageRollup } from "./service.ts";

export function usageHandlers(ctx: Ctx): Partial<Record<Method, Handler>> {
  return {
    GET: async ({ request }) => {
      const { account } = await authenticate(ctx, request, { write: false });
      readQuery(request, noQuery);
      return usageRollup(ctx.db, account.id);
    },
  };
}

export function usageGroupsHandlers(ctx: Ctx): Partial<Record<Method, Handler>> {
  return {
    GET: async ({ request }) => {
      const { account } = await authenticate(ctx, request, { write: false });
      return usageGroups(ctx.db, account.id, readQuery(request, groupsQuery), new Date(), ctx.services.prices);
    },
  };
}

export function usageRecordsHandlers(ctx: Ctx): Partial<Record<Method, Handler>> {
  return {
    GET: async ({ request }) => {
      const { account } = await authenticate(ctx, request, { write: false });
      return usageRecordsPage(ctx.db, account.id, readQuery(request, recordsQuery));
    },
  };
}

export const usageDocs: RouteDocs = {
  GET: {
    summary: "Usage of the last 30 days", tag: "Usage", auth: "account-read", query: noQuery,
    description: "30 UTC calendar days, today included. `requests` are client requests (a request that tried several lanes counts once); "
      + "`errors` are requests that ended failed (their last attempt `error` or `broken`). The totals also carry `attempts` (upstream attempts), "
      + "`fallbacks` (failed attempts after which the request moved to another lane), `budget_refusals` (402) and `rate_limit_refusals` (429) "
      + "(refused requests: never forwarded, not counted in `requests`).",
    responses: { "200": { description: "The account's 30-day summary." } },
  },
};

export const usageGroupsDocs: RouteDocs = {
  GET: {
    summary: "Usage grouped by day, routing key, lane, model or tag", tag: "Usage", auth: "account-read", query: groupsQuery,
    description: "Without `month`: the rollup's window (the last 30 days), so the groups add up to GET /v1/organizations/usage. "
      + "With `month=YYYY-MM`: that UTC calendar month up to now (months whose raw records retention dropped still answer). "
      + "Each group carries requests (client requests, each counted once, in the group of its last attempt), errors (requests that "
      + "ended failed), attempts and failed_attempts (upstream attempts), fallbacks (failed attempts after which the request moved to "
      + "another lane, in the failed lane's group), budget_refusals (402) and rate_limit_refusals (429) (in a group without provider or "
      + "model), tokens, cost_usd, saved_usd (what cache hits would have cost), the seat (`sub`) share and time to first byte p50/p95 (from a histogram: within one bucket of the exact value). "
      + "Grouped by model, each group also says who prices that model today (`price_source`: `operator`, `catalog`, or null for a model nobody prices, which budgeted keys pay at the fallback price). "
      + "`by=tag` (CONTRACT §9): one group per tag (`tag`), a record with two tags counting in both, and untagged usage (refusals included) in one group with `tag: null`. "
      + "`tag=<tag>`: only the records holding that tag count, in any grouping. Both read the tagged raw records (indexed), not the rollup.",
    responses: { "200": { description: "`{by, month, tag, since, until, groups: [...]}`" } },
  },
};

export const usageRecordsDocs: RouteDocs = {
  GET: {
    summary: "The latest usage records", tag: "Usage", auth: "account-read", query: recordsQuery,
    description: "One record per upstream attempt, newest first, with the lanes its request tried up to it and its request's `tags` (`[]` when untagged; `tag=<tag>` lists only the records holding it). Page back with `before=<next_before>` "
      + "(a keyset cursor: pages cost the same at any depth, and records written meanwhile never shift the pages after the first).",
    responses: { "200": { description: "`{records: [...], next_before}`" } },
  },
};

export function usageRoutes(ctx: Ctx, app: Elysia): void {
  mount(ctx, app, "/v1/organizations/usage", usageHandlers(ctx), MANAGEMENT, usageDocs);
  mount(ctx, app, "/v1/organizations/usage/groups", usageGroupsHandlers(ctx), MANAGEMENT, usageGroupsDocs);
  mount(ctx, app, "/v1/organizations/usage/records", usageRecordsHandlers(ctx), MANAGEMENT, usageRecordsDocs);
}
