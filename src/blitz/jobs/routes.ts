// /blitz/jobs (CONTRACT §8): up to 10,000 prompts in one job that outlives the request.
//   POST   /blitz/jobs        → 202 {id, object, status, …} + Location
//   GET    /blitz/jobs/{id}   → progress, cost so far, and results paged by index (?after=&limit=)
//   DELETE /blitz/jobs/{id}   → cancels what has not started; running prompts finish and are charged
// Only the routing key that created a job sees it; any other caller gets 404, as for an unknown id.
import type { Elysia } from "elysia";
import { z } from "zod";
import type { Ctx } from "../../context.ts";
import { badRequest, GatewayError } from "../../errors.ts";
import { bearer, queryOf } from "../../http/request.ts";
import { readJsonObject } from "../../http/body.ts";
import { BLITZ, json, mount, type RequestContext } from "../../http/route.ts";
import { newId } from "../../lib/ids.ts";
import { checkWebhookUrl } from "../../webhooks/url.ts";
import { resolveRoutingKey } from "../../relay/auth.ts";
import { noProviders } from "../../relay/relay-errors.ts";
import { refusePromptTags, requestTags, tagsRequired } from "../../relay/tags.ts";
import type { Json } from "../../protocols/types.ts";
import { parseBlitzBody } from "../validate.ts";
import { admitBatchWork, batchWorstCase, storeHeld, type BatchHold } from "../batches/admission.ts";
import { relayDeps } from "../../relay/relay-deps.ts";
import { presentJob } from "./present.ts";
import { vendorBatchLane } from "../vendor/apis.ts";
import { cancelJob, createJob, getJob, pageItems, vendorBound, type ItemRow, type JobRow } from "./store.ts";

export { presentJob };

export const BLITZ_JOB_MAX_PROMPTS = 10_000;
/**
 * The ceiling of a job's body whatever MAX_REQUEST_BYTES says: the body is read whole and parsed
 * before it is stored, and its parsed form takes several times its size in memory meanwhile.
 */
const JOB_MAX_BYTES = 64 * 1024 * 1024;
/** A job's body cap: the operator's MAX_REQUEST_BYTES like any request's (413 past it), at most JOB_MAX_BYTES. */
export const jobMaxBytes = (maxRequestBytes: number) => Math.min(maxRequestBytes, JOB_MAX_BYTES);
const PAGE_DEFAULT = 100;
const PAGE_MAX = 1000;

const authRequired = () =>
  new GatewayError(401, "No routing key was sent. /blitz/jobs needs a routing key (gw_…) in the Authorization header.", { code: "auth_required" });
const notFound = (ctx: Ctx, id: string) =>
  new GatewayError(404, `No job ${id} for this routing key (a job is visible to the key that created it, and deleted ${ctx.config.BLITZ_JOB_RESULT_TTL_HOURS} hours after it ends).`, { code: "not_found" });

export const jobBodyDoc = z.looseObject({
  model: z.string().min(1),
  prompts: z.array(z.union([z.string(), z.looseObject({ messages: z.array(z.looseObject({ role: z.string() })) })])).min(1).max(BLITZ_JOB_MAX_PROMPTS),
  completion_window: z.literal("24h").optional().meta({ description: "Batch work: the job's summed worst case must fit the key's budget at submit (402 otherwise, nothing stored); each result says how it ran (`mode`)." }),
  mode: z.enum(["batch", "live"]).optional().meta({ description: "`batch`: the same as `completion_window: \"24h\"`." }),
  webhook_url: z.string().max(2048).nullable().optional().meta({
    description: "http(s) URL that receives `job.completed` or `job.failed` when the job's last prompt ends (`job.cancelled` when it is cancelled), signed with `Gateway-Signature` (see GET /v1/organizations/webhook-secret); refused when it resolves to a private address unless the operator allows private upstreams.",
  }),
}).meta({ description: "The /blitz body with up to 10,000 prompts. Shared chat parameters apply to every prompt." });

const pageDoc = z.strictObject({
  after: z.string().regex(/^-?\d+$/).optional().meta({ description: `Results after this index, -1 to ${BLITZ_JOB_MAX_PROMPTS - 1} (default: from the start).` }),
  limit: z.string().regex(/^\d+$/).optional().meta({ description: `Results per page, 1 to ${PAGE_MAX} (default ${PAGE_DEFAULT}).` }),
});

export function blitzJobRoutes(ctx: Ctx, app: Elysia): void {
  mount(ctx, app, "/blitz/jobs", { POST: (rc) => submit(ctx, rc) }, BLITZ, {
    POST: {
      summary: "Submit up to 10,000 prompts as a job", tag: "Inference", auth: "routing-key", body: jobBodyDoc,
      description: "Each prompt is admitted and charged like its own request when its turn comes (budget, rate limits, concurrency cap). The job runs on every instance's workers and survives the death of one. Tags (`x-gateway-tags`, or the top-level `metadata.tags`) are kept with the job (its `tags`) and written on every item's usage records.",
      responses: { "202": { description: "`{id, object: \"blitz.job\", status: \"queued\", total, …}` with `Location: /blitz/jobs/{id}`." } },
    },
  });
  mount(ctx, app, "/blitz/jobs/:id", { GET: (rc) => show(ctx, rc), DELETE: (rc) => cancel(ctx, rc) }, BLITZ, {
    GET: {
      summary: "A job's progress, cost so far and results (paged)", tag: "Inference", auth: "routing-key", query: pageDoc,
      responses: { "200": { description: "The job with `results`: `[{index, state, status, mode, completion | error, usage, cost_usd}]` (`mode`: `batch` when a vendor batch API answered the item, `live` otherwise) after `after`, and `next_after` (null on the last page)." } },
    },
    DELETE: {
      summary: "Cancel a job", tag: "Inference", auth: "routing-key",
      responses: { "200": { description: "The job, `status: \"cancelled\"`: prompts not started never run; running ones finish and are charged." } },
    },
  });
}

async function submit(ctx: Ctx, rc: RequestContext): Promise<Response> {
  const { request } = rc;
  if (!bearer(request)) throw authRequired();
  const key = await resolveRoutingKey(ctx, request);
  const body = (await readJsonObject(request, jobMaxBytes(ctx.config.MAX_REQUEST_BYTES), badRequest)).value;
  if (body.stream !== undefined) throw badRequest("stream is not a /blitz/jobs field: results are read with GET /blitz/jobs/{id} (use POST /blitz with \"stream\": true for events).");
  // Checked now (http(s), no credentials, public unless the operator allows private addresses) and
  // again when each delivery connects.
  const webhookUrl = body.webhook_url === undefined || body.webhook_url === null ? null : await checkWebhookUrl(ctx, body.webhook_url);
  delete body.webhook_url;
  const batchMode = batchModeOf(body);
  // CONTRACT §9: the job's tags (header, else the shared metadata.tags), kept on the job for every item's records.
  const tags = requestTags(request.headers, body as Json);
  const batch = parseBlitzBody(body, { max: BLITZ_JOB_MAX_PROMPTS, path: "/blitz/jobs" });
  refusePromptTags(batch.requests);
  if (tags === null && key.requireTags) throw tagsRequired();
  if (key.lanes.length === 0) throw noProviders();
  const id = newId("bjob");
  // Batch work (CONTRACT §9): on a key whose first lane has a vendor batch API the items go there
  // (blitz/vendor/poller.ts), priced at the vendor's batch discount; elsewhere they run live.
  const vendorLane = batchMode ? vendorBatchLane(key) : null;
  // The job's summed worst case (at batch prices on a vendor lane) must fit the budget now, or 402
  // before anything is stored or uploaded. A vendor batch job holds it until its batch ends; each
  // live prompt admits itself when it runs.
  let hold: BatchHold | null = null;
  if (batchMode) {
    const deps = relayDeps(ctx);
    ({ hold } = await admitBatchWork(deps, key, batch.requests.length, batchWorstCase(deps, key, batch.requests), vendorLane).catch((e: unknown) => {
      rc.access.noteRefusal("blitz", e);
      throw e;
    }));
  }
  const vendor = vendorLane ? vendorBound(vendorLane, hold) : undefined;
  await storeHeld(relayDeps(ctx), key, hold, () => createJob(ctx, { id, accountId: key.accountId, routingKeyId: key.id, keyHash: key.hash, webhookUrl, tags }, batch.requests, vendor));
  if (vendor) void ctx.services.blitzJobs.nudgeVendor?.();
  else await ctx.services.blitzJobs.queue.add(id, batch.requests.map((_, i) => i));
  const job = (await getJob(ctx, id))!;
  return json(presentJob(job), 202, { location: `/blitz/jobs/${id}` });
}

/**
 * `completion_window: "24h"` or `mode: "batch"` (CONTRACT §9 "Batch work"): the job is batch work.
 * Neither field is a chat parameter, so neither goes upstream.
 */
function batchModeOf(body: Record<string, unknown>): boolean {
  const { completion_window: window, mode } = body;
  delete body.completion_window;
  delete body.mode;
  if (window !== undefined && window !== "24h") throw badRequest(`completion_window must be "24h" (batch work, at batch prices where a lane has a vendor batch API), or left out.`);
  if (mode !== undefined && mode !== "batch" && mode !== "live") throw badRequest(`mode must be "batch" or "live".`);
  return window === "24h" || mode === "batch";
}

async function ownJob(ctx: Ctx, rc: RequestContext): Promise<JobRow> {
  if (!bearer(rc.request)) throw authRequired();
  const key = await resolveRoutingKey(ctx, rc.request);
  const id = decodeURIComponent(new URL(rc.request.url).pathname.slice("/blitz/jobs/".length));
  const job = /^[\w-]{1,64}$/.test(id) ? await getJob(ctx, id) : null;
  if (!job || job.routingKeyId !== key.id || (job.expiresAt && job.expiresAt.getTime() < Date.now())) throw notFound(ctx, id.slice(0, 64));
  return job;
}

async function show(ctx: Ctx, rc: RequestContext) {
  const job = await ownJob(ctx, rc);
  const q = queryOf(rc.request);
  for (const k of Object.keys(q)) if (k !== "after" && k !== "limit") throw badRequest(`Unknown query parameter ${k.slice(0, 40)}: only after and limit page the results.`);
  const after = q.after === undefined ? -1 : Number(q.after);
  // Bounded by the largest index a job can have: a larger number (past the index column's range)
  // would reach the database and fail there.
  if (!Number.isInteger(after) || after < -1 || after >= BLITZ_JOB_MAX_PROMPTS) {
    throw badRequest(`after must be an item index from -1 to ${BLITZ_JOB_MAX_PROMPTS - 1}: the last index of the previous page.`);
  }
  const limit = q.limit === undefined ? PAGE_DEFAULT : Number(q.limit);
  if (!Number.isInteger(limit) || limit < 1 || limit > PAGE_MAX) throw badRequest(`limit must be an integer from 1 to ${PAGE_MAX}.`);
  const items = await pageItems(ctx, job.id, after, limit);
  const last = items.at(-1)?.idx;
  return { ...presentJob(job), results: items.map(presentItem), next_after: last !== undefined && last < job.total - 1 ? last : null };
}

async function cancel(ctx: Ctx, rc: RequestContext) {
  const job = await ownJob(ctx, rc);
  const after = await cancelJob(ctx, job.id);
  // A cancel ends the job: what hooks on a job's end (its webhook, queued with the cancel) runs now.
  if (after) for (const f of ctx.services.blitzJobs.onEnded) f(after);
  return presentJob(after ?? (await getJob(ctx, job.id)) ?? job);
}

function presentItem(i: ItemRow) {
  const r = (i.result ?? {}) as { completion?: unknown; error?: unknown };
  return {
    index: i.idx,
    state: i.status,
    status: i.httpStatus,
    ...(r.completion !== undefined ? { completion: r.completion } : {}),
    ...(r.error !== undefined ? { error: r.error } : {}),
    ...(typeof (r as { mode?: unknown }).mode === "string" ? { mode: (r as { mode: string }).mode } : {}),
    usage: i.usage,
    cost_usd: i.costUsd,
  };
}
