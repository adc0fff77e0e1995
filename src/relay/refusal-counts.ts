// Refused requests (402 budget_exceeded, 429 rate_limit_exceeded) counted into the daily usage
// rollup. A refusal is the cheap answer a flood gets, so it costs no statement of its own: it
// bumps a counter in memory, and the usage flush adds every counter to the rollup in one upsert.
// No raw record is kept (a refusal reached no upstream and cost nothing); what a crash loses is
// the last second's counts, never money.
import { sql } from "drizzle-orm";
import type { Db } from "../store/db/client.ts";

export type RefusalKind = "budget" | "rate_limit";

/** Distinct (account, key, day) counters held before the oldest are written regardless. */
const MAX_COUNTERS = 50_000;

export interface RefusalCounts {
  add(accountId: string, routingKeyId: string | null, kind: RefusalKind): void;
  /** Adds what was counted to the rollup; kept for the next write when the database refuses. */
  write(db: Db): Promise<void>;
  pending(): number;
}

interface Counter { accountId: string; keyId: string; day: string; budget: number; rate: number }

export function createRefusalCounts(): RefusalCounts {
  let counts = new Map<string, Counter>();
  return {
    add(accountId, routingKeyId, kind) {
      const day = new Date().toISOString().slice(0, 10);
      const keyId = routingKeyId ?? "";
      const k = `${accountId}\t${keyId}\t${day}`;
      let c = counts.get(k);
      if (!c) {
        if (counts.size >= MAX_COUNTERS) return; // a flood of distinct keys while the database is away
        counts.set(k, (c = { accountId, keyId, day, budget: 0, rate: 0 }));
      }
      if (kind === "budget") c.budget++;
      else c.rate++;
    },
    async write(db) {
      if (!counts.size) return;
      const batch = counts;
      counts = new Map();
      const rows = [...batch.values()].map((c) => ({ a: c.accountId, k: c.keyId, d: c.day, b: c.budget, r: c.rate }));
      try {
        await db.execute(sql`insert into usage_daily as d (account_id, day, routing_key_id, provider, model, outcome, budget_refusals, rate_limit_refusals, ttfb)
          select x.a, x.d::date, x.k, '', '', 'refused', x.b, x.r, '{0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0}'
          from json_to_recordset(${JSON.stringify(rows)}::json) as x(a text, k text, d text, b bigint, r bigint)
          on conflict (account_id, day, routing_key_id, provider, model, outcome) do update set
            budget_refusals = d.budget_refusals + excluded.budget_refusals,
            rate_limit_refusals = d.rate_limit_refusals + excluded.rate_limit_refusals`);
      } catch (e) {
        for (const [k, c] of batch) {
          const cur = counts.get(k);
          if (cur) { cur.budget += c.budget; cur.rate += c.rate; } else counts.set(k, c);
        }
        throw e;
      }
    },
    pending: () => counts.size,
  };
}
