// Budget alerts: every BUDGET_ALERT_CHECK_SECONDS one instance of the fleet compares the month
// spend of every budgeted key of the accounts with alert settings (the budget's own counter:
// requests in flight at their reserved cost) with the thresholds. Each instance ticks every
// interval; the first tick of an interval claims it (one INCR in the shared store), so the check
// costs the fleet one pass over those keys per interval, not one per instance. A threshold reached
// is written to budget_alert_firings (key, month, threshold) with its deliveries in one
// transaction; the primary key lets exactly one writer win, so each fires once per key and month
// however many instances and requests race. A key's budget refusal (402) fires its 100 % threshold
// at once (refused()): a key refuses before its counter reaches 100 % while
// reservations are in flight, so the periodic check alone would never send the 100 % alert.
import { and, eq, isNotNull, isNull } from "drizzle-orm";
import type { Base } from "../base.ts";
import type { WebhookSender } from "./sender.ts";
import { fleetIntervalJob, type Job } from "../jobs/job.ts";
import { monthKey } from "../lib/time.ts";
import { monthSpendUsd } from "../store/spend-counters.ts";
import { budgetAlertFirings, budgetAlertSettings, routingKeys } from "../store/db/schema/index.ts";
import { enqueueEvent, type Destination } from "./outbox.ts";

/** Keys checked at once (each is one counter read). */
const PARALLEL = 8;

const usd = (n: number) => `$${n.toFixed(n < 1 ? 4 : 2)}`;

/** What the check uses: the stores and settings, and the webhook sender it nudges when it queued an alert. */
export type BudgetAlertDeps = Base & { services: { webhooks: Pick<WebhookSender, "nudge"> } };

/** The key fields a check reads. */
type AlertKey = { id: string; label: string; keyPrefix: string; monthlyBudgetUsd: number | null; budgetExcludesSeats: boolean };

/** The longest a budget refusal waits for its alerts to be queued before it answers 402 anyway. */
export const REFUSAL_ALERT_WAIT_MS = 2000;
/** How long an account found without alert settings is not asked again on its keys' refusals. */
const NO_SETTINGS_MS = 30_000;

export interface BudgetAlerts {
  /** The periodic check of every budgeted key of the accounts with settings. */
  job: Job;
  /**
   * A key answered 402 budget_exceeded: its budget is used up for what it is asked, whatever the
   * counter's percentage says (reservations in flight refuse a request before spend reaches
   * 100 %, and settle lower). The 100 % threshold fires now, with every lower one the spend has
   * reached, queued before the 402 is answered (waiting at most REFUSAL_ALERT_WAIT_MS): an alert
   * comes no later than the first 402 it warns of. After the first, a refusal costs nothing here.
   */
  refused(key: { id: string; accountId: string }): Promise<void>;
}

export function budgetAlerts(ctx: BudgetAlertDeps): BudgetAlerts {
  /** `<key>:<month>:<percent>` known to have fired: not asked again. */
  let fired = new Set<string>();
  let firedMonth = "";
  /** `<key>:<month>` whose refusal fired every threshold (or found no settings, until the time). */
  const stopped = new Map<string, number>();

  /** `refused`: the key answers 402, so the 100 % threshold counts as reached. */
  async function checkKey(s: typeof budgetAlertSettings.$inferSelect, k: AlertKey, refused = false) {
    const budget = k.monthlyBudgetUsd ?? 0;
    if (budget <= 0) return false;
    const { month, usd: spend } = await monthSpendUsd(ctx, { id: k.id, monthlyBudgetUsd: budget, budgetExcludesSeats: k.budgetExcludesSeats });
    if (month !== firedMonth) {
      fired = new Set();
      firedMonth = month;
    }
    // A nano-dollar of slack: a spend that reached the budget exactly is 100 %.
    const reached = (t: number) => spend + 1e-9 >= (budget * t) / 100;
    const due = s.thresholds.filter((t) => (reached(t) || (refused && t === 100)) && !fired.has(`${k.id}:${month}:${t}`));
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
            message: reached(t)
              ? `Routing key "${k.label}" (${k.keyPrefix}…) has used ${t} % of its monthly budget: ${usd(spend)} of ${usd(budget)} in ${month}.`
              : `Routing key "${k.label}" (${k.keyPrefix}…) has reached its monthly budget: a request was refused (402 budget_exceeded) with ${usd(spend)} of ${usd(budget)} spent or held by requests in flight in ${month}.`,
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

  async function onRefusal(key: { id: string; accountId: string }, memo: string): Promise<void> {
    const rows = await ctx.db
      .select({
        s: budgetAlertSettings,
        k: { id: routingKeys.id, label: routingKeys.label, keyPrefix: routingKeys.keyPrefix, monthlyBudgetUsd: routingKeys.monthlyBudgetUsd, budgetExcludesSeats: routingKeys.budgetExcludesSeats },
      })
      .from(budgetAlertSettings)
      .innerJoin(routingKeys, and(eq(routingKeys.accountId, budgetAlertSettings.accountId), eq(routingKeys.id, key.id), isNotNull(routingKeys.monthlyBudgetUsd)))
      .where(eq(budgetAlertSettings.accountId, key.accountId));
    if (!rows.length) {
      stopped.set(memo, Date.now() + NO_SETTINGS_MS);
      return;
    }
    if (await checkKey(rows[0]!.s, rows[0]!.k, true)) ctx.services.webhooks.nudge();
    stopped.set(memo, Infinity);
  }

  const refused = async (key: { id: string; accountId: string }): Promise<void> => {
    const memo = `${key.id}:${monthKey()}`;
    if ((stopped.get(memo) ?? 0) > Date.now()) return;
    if (stopped.size > 10_000) stopped.clear();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const late = new Promise<void>((resolve) => { timer = setTimeout(resolve, REFUSAL_ALERT_WAIT_MS); });
    const check = onRefusal(key, memo).catch((e) => ctx.log.warn({ keyId: key.id, err: e instanceof Error ? e.message : String(e) }, "budget alert on a refusal failed; the periodic check will retry"));
    await Promise.race([check, late]).finally(() => clearTimeout(timer));
  };

  // With the shared store away every instance checks: spend then comes from Postgres.
  const job = fleetIntervalJob(ctx, "budget-alerts", ctx.config.BUDGET_ALERT_CHECK_SECONDS * 1000, async () => {
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
  return { job, refused };
}
