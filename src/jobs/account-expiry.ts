// Removes unpaid agent-created accounts at their deadline (SPEC "Account plan": 48 h after
// signup). Every instance runs it; the conditional UPDATE in removeExpiredAccount makes each
// removal happen once, and lets an activation that got there first win.
import type { Base } from "../base.ts";
import { publishInvalidation, type Publishing } from "../store/invalidation.ts";
import { expiredAccountIds, removeExpiredAccount } from "../signup/lifecycle.ts";
import { intervalJob, type Job } from "./job.ts";

const BATCH = 200;

/** One sweep; returns the ids it removed. */
export async function sweepExpiredAccounts(ctx: Base & Publishing, now = new Date()): Promise<string[]> {
  const removed: string[] = [];
  for (;;) {
    const ids = await expiredAccountIds(ctx.db, now, BATCH);
    let progressed = false;
    for (const id of ids) {
      if (!(await removeExpiredAccount(ctx.db, id, now))) continue;
      progressed = true;
      removed.push(id);
      // Inference caches drop the account's keys on every instance.
      await publishInvalidation(ctx, { kind: "account", accountId: id });
      ctx.log.info({ job: "account-expiry", accountId: id }, "unpaid account removed at its deadline");
    }
    if (ids.length < BATCH || !progressed) break;
  }
  return removed;
}

export function accountExpiryJob(ctx: Base & Publishing): Job {
  return intervalJob(ctx, "account-expiry", ctx.config.EXPIRY_SWEEP_INTERVAL_SECONDS * 1000, async () => {
    await sweepExpiredAccounts(ctx);
  });
}
