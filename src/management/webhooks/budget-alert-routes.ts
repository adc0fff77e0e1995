// /v1/organizations/budget-alerts: thresholds, in percent of each routing key's monthly budget,
// and where an alert goes (a signed webhook, an email, or both). Each threshold fires once per key
// and month, across instances (webhooks/budget-alerts.ts).
//   GET (AT) → {budget_alerts: {...} | null}; POST (SK) replaces them; DELETE (SK) turns them off.
import type { Elysia } from "elysia";
import { eq } from "drizzle-orm";
import { z } from "zod";
import type { Ctx } from "../../context.ts";
import { badRequest } from "../../errors.ts";
import { mount, MANAGEMENT, type Handler, type Method } from "../../http/route.ts";
import type { RouteDocs } from "../../http/openapi.ts";
import { iso } from "../../lib/time.ts";
import { budgetAlertSettings } from "../../store/db/schema/index.ts";
import { checkWebhookUrl } from "../../webhooks/url.ts";
import { authenticate } from "../guard.ts";
import { readBody, readQuery } from "../zod-input.ts";

const noQuery = z.strictObject({});
export const budgetAlertsBody = z.strictObject({
  thresholds_percent: z.array(z.number().int().min(1).max(100)).min(1).max(10)
    .meta({ description: "Percentages of each key's monthly_budget_usd, e.g. [50, 80, 100]; each fires once per key and month." }),
  webhook_url: z.string().max(2048).nullable().optional().meta({ description: "Receives `budget.threshold_reached`, signed like every webhook." }),
  email: z.email().max(254).nullable().optional().meta({ description: "Receives the same alert as a mail." }),
});

type Row = typeof budgetAlertSettings.$inferSelect;
const present = (r: Row | undefined) =>
  r ? { thresholds_percent: r.thresholds, webhook_url: r.webhookUrl, email: r.email, updated_at: iso(r.updatedAt) } : null;

export function budgetAlertHandlers(ctx: Ctx): Partial<Record<Method, Handler>> {
  const read = async (accountId: string) =>
    (await ctx.db.select().from(budgetAlertSettings).where(eq(budgetAlertSettings.accountId, accountId)).limit(1))[0];
  return {
    GET: async ({ request }) => {
      const { account } = await authenticate(ctx, request, { write: false });
      readQuery(request, noQuery);
      return { budget_alerts: present(await read(account.id)) };
    },
    POST: async ({ request }) => {
      const { account } = await authenticate(ctx, request, { write: true });
      readQuery(request, noQuery);
      const body = await readBody(ctx, request, budgetAlertsBody);
      if (!body.webhook_url && !body.email) throw badRequest("Name where alerts go: `webhook_url`, `email`, or both.");
      const webhookUrl = body.webhook_url ? await checkWebhookUrl(ctx, body.webhook_url) : null;
      const values = { thresholds: [...new Set(body.thresholds_percent)].sort((a, b) => a - b), webhookUrl, email: body.email ?? null, updatedAt: new Date() };
      await ctx.db.insert(budgetAlertSettings).values({ accountId: account.id, ...values })
        .onConflictDoUpdate({ target: budgetAlertSettings.accountId, set: values });
      return { budget_alerts: present(await read(account.id)) };
    },
    DELETE: async ({ request }) => {
      const { account } = await authenticate(ctx, request, { write: true });
      readQuery(request, noQuery);
      await ctx.db.delete(budgetAlertSettings).where(eq(budgetAlertSettings.accountId, account.id));
      return { deleted: true };
    },
  };
}

export const budgetAlertDocs: RouteDocs = {
  GET: { summary: "Budget alert settings", tag: "Webhooks", auth: "account-read", query: noQuery, responses: { "200": { description: "`{budget_alerts: {thresholds_percent, webhook_url, email, updated_at} | null}`" } } },
  POST: {
    summary: "Set budget alerts", tag: "Webhooks", auth: "account-write", query: noQuery, body: budgetAlertsBody,
    description: "Replaces the account's alert settings. For every routing key with a monthly budget, each threshold fires once per calendar month (UTC), across instances, when the key's month spend (requests in flight counted at their reserved cost, as the budget counts them) reaches it: a signed `budget.threshold_reached` webhook and/or a mail.",
    responses: { "200": { description: "`{budget_alerts}`" } },
  },
  DELETE: { summary: "Turn budget alerts off", tag: "Webhooks", auth: "account-write", query: noQuery, responses: { "200": { description: "`{deleted: true}`" } } },
};

export function budgetAlertRoutes(ctx: Ctx, app: Elysia): void {
  mount(ctx, app, "/v1/organizations/budget-alerts", budgetAlertHandlers(ctx), MANAGEMENT, budgetAlertDocs);
}
