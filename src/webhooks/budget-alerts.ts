// Budget alerts: every BUDGET_ALERT_CHECK_SECONDS one instance of the fleet compares the month
// spend of every budgeted key of the accounts with alert settings (the budget's own counter:
// requests in flight at their reserved cost) with the thresholds. Each instance ticks every
// interval; the first tick of an interval claims it (one INCR in the shared store), so the check
// costs the fleet one pass over those keys per interval, not one per instance. A threshold reached
// is written to budget_alert_firings (key, month, threshold) with its deliveries in one
// transaction; the primary key lets exactly one writer win, so each fires once per key and month
// however many instances and requests race.
import { and, eq, isNotNull, isNull } from "drizzle-orm";
import type { Base } from "../base.ts";
import type { Services } from "../context.ts";
import { fleetIntervalJob, type Job } from "../jobs/job.ts";
import { monthSpendUsd } from "../store/spend-counters.ts";
import { budgetAlertFirings, budgetAlertSettings, routingKeys } from "../store/db/schema/index.ts";
import { enqueueEvent, type Destination } from "./outbox.ts";

/** Keys checked at once (each is one counter read). */
const PARALLEL = 8;

const usd = (n: number) => `$${n.toFixed(n < 1 ? 4 : 2)}`;

/** What the check uses: the stores and settings, and the webhook sender it nudges when it queued an alert. */
export type BudgetAlertDeps = Base & { services: Pick<Services, "webhooks"> };

export function budgetAlertsJob(ctx: BudgetAlertDeps): Job {
  /** `<key>:<month>:<percent>` known to have fired: not asked again. */
  let fired = new Set<string>();
  let firedMonth = "";

  async function checkKey(s: typeof budgetAlertSettings.$inferSelect, k: { id: string; label: string; keyPrefix: string; monthlyBudgetUsd: number | null; budgetExcludesSeats: boolean }) {
    const budget = k.monthlyBudgetUsd ?? 0;
    if (budget <= 0) return false;
    const { month, usd: spend } = await monthSpendUsd(ctx, { id: k.id, monthlyBudgetUsd: budget, budgetExcludesSeats: k.budgetExcludesSeats });
    if (month !== firedMonth) {
      fired = new Set();
      firedMonth = month;
    }
    // A nano-dollar of slack: a spend that reached the budget exactly is 100 %.
    const due = s.thresholds.filter((t) => spend + 1e-9 >= (budget * t) / 100 && !fired.has(`${k.id}:${month}:${t}`));
    if (!due.length) return false;
    const to: Destination[] = [];
    if (s.webhookUrl) to.push({ channel: "webhook", target: s.webhookUrl });
    if (s.email) to.push({ channel: "email", target: s.email });
    let queued = false;
    await ctx.db.transaction(async (tx) => {
      for (const t of due) {
        const won = await tx.insert(budgetAlertFirings).values({ routingKeyId: k.id, month, thresholdPercent: t, accountId: s.accountId })
          .onConflictDoNothing().returning({ t: budgetAlertFirings.thresholdPercent });
        if (!won.length) continue;
        queued = true;
        await enqueueEvent(tx, s.accountId, {
          type: "budget.threshold_reached",
          data: {
            message: `Routing key "${k.label}" (${k.keyPrefix}…) has used ${t} % of its monthly budget: ${usd(spend)} of ${usd(budget)} in ${month}.`,
            routing_key: { id: k.id, label: k.label, key_prefix: k.keyPrefix },
            month,
            threshold_percent: t,
            monthly_budget_usd: budget,
            spend_usd: spend,
          },
        }, to);
      }
    });
    for (const t of due) fired.add(`${k.id}:${month}:${t}`);
    return queued;
  }

  // With the shared store away every instance checks: spend then comes from Postgres.
  return fleetIntervalJob(ctx, "budget-alerts", ctx.config.BUDGET_ALERT_CHECK_SECONDS * 1000, async () => {
    const rows = await ctx.db
      .select({
        s: budgetAlertSettings,
        k: { id: routingKeys.id, label: routingKeys.label, keyPrefix: routingKeys.keyPrefix, monthlyBudgetUsd: routingKeys.monthlyBudgetUsd, budgetExcludesSeats: routingKeys.budgetExcludesSeats },
      })
      .from(budgetAlertSettings)
      .innerJoin(routingKeys, and(eq(routingKeys.accountId, budgetAlertSettings.accountId), isNotNull(routingKeys.monthlyBudgetUsd), isNull(routingKeys.revokedAt)));
    let queued = false;
    for (let i = 0; i < rows.length; i += PARALLEL) {
      const results = await Promise.allSettled(rows.slice(i, i + PARALLEL).map((r) => checkKey(r.s, r.k)));
      for (const r of results) {
        if (r.status === "fulfilled") queued ||= r.value;
        else ctx.log.warn({ err: r.reason instanceof Error ? r.reason.message : String(r.reason) }, "budget alert check failed");
      }
    }
    if (queued) ctx.services.webhooks.nudge();
  });
}
