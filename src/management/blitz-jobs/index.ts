// GET /v1/organizations/blitz-jobs (AT): the account's /blitz jobs, newest first, each with its
// status, progress (done of total), cost so far and the routing key that submitted it. The job
// routes themselves (/blitz/jobs/{id}) answer only the routing key that created a job; this list
// is the operator's view across every key of the account (the dashboard's Jobs view). A job
// whose results expired is gone from both.
import type { Elysia } from "elysia";
import { and, desc, eq, gt, inArray, isNull, or } from "drizzle-orm";
import { z } from "zod";
import type { Base } from "../../base.ts";
import type { Ctx } from "../../context.ts";
import { mount, MANAGEMENT, type Handler, type Method } from "../../http/route.ts";
import type { RouteDocs } from "../../http/openapi.ts";
import { blitzJobs, routingKeys } from "../../store/db/schema/index.ts";
import { presentJob } from "../../blitz/jobs/routes.ts";
import { withProgress } from "../../blitz/jobs/store.ts";
import { authenticate } from "../guard.ts";
import { readQuery } from "../zod-input.ts";

export const JOBS_LIMIT_MAX = 200;
const JOBS_LIMIT_DEFAULT = 50;

export const jobsQuery = z.strictObject({
  limit: z.string().refine((s) => /^[1-9]\d{0,3}$/.test(s) && Number(s) <= JOBS_LIMIT_MAX, `\`limit\` must be a whole number from 1 to ${JOBS_LIMIT_MAX}.`)
    .transform(Number).optional(),
  /** One routing key of the caller's. */
  key: z.string().min(1).max(200).optional(),
});

export async function listJobs(ctx: Base, accountId: string, q: z.output<typeof jobsQuery>) {
  const keys = await ctx.db.select({ id: routingKeys.id, label: routingKeys.label }).from(routingKeys)
    .where(q.key ? and(eq(routingKeys.accountId, accountId), eq(routingKeys.id, q.key)) : eq(routingKeys.accountId, accountId));
  if (keys.length === 0) return { jobs: [] };
  const label = new Map(keys.map((k) => [k.id, k.label]));
  // By the account's keys: the (routing_key_id, created_at) index serves it.
  const rows = await ctx.db.select().from(blitzJobs)
    .where(and(inArray(blitzJobs.routingKeyId, keys.map((k) => k.id)), eq(blitzJobs.accountId, accountId),
      or(isNull(blitzJobs.expiresAt), gt(blitzJobs.expiresAt, new Date()))))
    .orderBy(desc(blitzJobs.createdAt), desc(blitzJobs.id)).limit(q.limit ?? JOBS_LIMIT_DEFAULT);
  // A job still running counts its progress from its items (its row holds the counts once it ends).
  return { jobs: (await withProgress(ctx, rows)).map((j) => ({ ...presentJob(j), routing_key_id: j.routingKeyId, routing_key_label: label.get(j.routingKeyId) ?? null })) };
}

export function blitzJobsHandlers(ctx: Ctx): Partial<Record<Method, Handler>> {
  return {
    GET: async ({ request }) => {
      const { account } = await authenticate(ctx, request, { write: false });
      return listJobs(ctx, account.id, readQuery(request, jobsQuery));
    },
  };
}

export const blitzJobsDocs: RouteDocs = {
  GET: {
    summary: "The account's /blitz jobs", tag: "Usage", auth: "account-read", query: jobsQuery,
    description: `Newest first, at most \`limit\` (1 to ${JOBS_LIMIT_MAX}, default ${JOBS_LIMIT_DEFAULT}), optionally one routing key's (\`key\`). `
      + "Each job as GET /blitz/jobs/{id} shows it (without results): `status`, `total`, `progress {done, remaining, succeeded, failed, not_run, interrupted}`, "
      + "`cost_usd` so far, plus `routing_key_id` and `routing_key_label`. Jobs whose results expired are not listed.",
    responses: { "200": { description: "`{jobs: [...]}`" } },
  },
};

export function blitzJobsRoutes(ctx: Ctx, app: Elysia): void {
  mount(ctx, app, "/v1/organizations/blitz-jobs", blitzJobsHandlers(ctx), MANAGEMENT, blitzJobsDocs);
}
