// A job as the API shows it: GET/POST/DELETE /blitz/jobs answers and the job webhooks' `data.job`.
import type { blitzJobs } from "../../store/db/schema/index.ts";

/** A job's row (store.ts names it JobRow; read from the schema here so the store can present what it writes). */
type JobRow = typeof blitzJobs.$inferSelect;

const iso = (d: Date | null) => (d ? d.toISOString() : null);

export function presentJob(j: JobRow) {
  return {
    id: j.id,
    object: "blitz.job",
    status: j.status,
    total: j.total,
    progress: { done: j.total - j.remaining, remaining: j.remaining, succeeded: j.succeeded, failed: j.failed, not_run: j.notRun, interrupted: j.interrupted },
    cost_usd: j.costUsd,
    stop_reason: j.stopReason,
    webhook_url: j.webhookUrl,
    // The tags the job was submitted with (CONTRACT §9), on every item's records; [] when untagged.
    tags: j.tags ?? [],
    created_at: iso(j.createdAt),
    finished_at: iso(j.finishedAt),
    expires_at: iso(j.expiresAt),
  };
}

