// The webhook outbox (CONTRACT §8): an event is written in the same transaction as what it
// announces, so a crash between the two cannot lose it; any instance then claims due deliveries
// with a lease (FOR UPDATE SKIP LOCKED: two instances never take the same row at once) and
// records the outcome. Delivered at least once: a sender that dies mid-attempt leaves its lease to
// expire and another instance sends again; receivers deduplicate on the event id.
import { and, eq, lt, ne, sql } from "drizzle-orm";
import type { Db } from "../store/db/client.ts";
import { newId } from "../lib/ids.ts";
import { webhookDeliveries } from "../store/db/schema/index.ts";

export type DeliveryRow = typeof webhookDeliveries.$inferSelect;
type Tx = Parameters<Parameters<Db["transaction"]>[0]>[0];

/** Retries stop this long after the event (CONTRACT §8: retried with backoff for 24 h). */
export const RETRY_WINDOW_MS = 24 * 3600_000;
/** A claimed delivery is another instance's to take over after this (well past one attempt's timeout). */
export const LEASE_MS = 60_000;

export interface Event {
  type: string;
  data: Record<string, unknown>;
}

export interface Destination {
  channel: "webhook" | "email";
  target: string;
}

/** The body every channel carries: `{id, type, created, data}`. */
export function eventBody(id: string, e: Event, created = new Date()): string {
  return JSON.stringify({ id, object: "event", type: e.type, created: Math.floor(created.getTime() / 1000), data: e.data });
}

/** Queues `e` to each destination inside `tx`; returns the event ids. */
export async function enqueueEvent(tx: Tx | Db, accountId: string, e: Event, to: Destination[]): Promise<string[]> {
  if (!to.length) return [];
  const rows = to.map((d) => {
    const id = newId("evt");
    return { id, accountId, channel: d.channel, target: d.target, eventType: e.type, body: eventBody(id, e) };
  });
  await tx.insert(webhookDeliveries).values(rows);
  return rows.map((r) => r.id);
}

/**
 * Takes up to `limit` due deliveries for this sender (attempts counted now, lease set), fairly
 * across accounts: at most `perAccount` of one account in flight on this sender, `busy` counting
 * those it already runs, and each account's oldest due first, round by round (every account's
 * first, then every account's second, …), so one account's backlog never queues another's.
 * Window functions cannot take row locks, so the claim re-checks the lease in the UPDATE itself:
 * two senders racing for one row wait for each other there and only the first takes it.
 */
export async function claimDue(db: Db, limit: number, perAccount = limit, busy: ReadonlyMap<string, number> = new Map()): Promise<DeliveryRow[]> {
  const d = webhookDeliveries;
  const running = JSON.stringify(Object.fromEntries(busy));
  const free = sql`(${d.leaseUntil} is null or ${d.leaseUntil} < now())`;
  return db.update(d)
    .set({ attempts: sql`${d.attempts} + 1`, leaseUntil: sql`now() + make_interval(secs => ${LEASE_MS / 1000})` })
    .where(and(eq(d.status, "pending"), free, sql`${d.id} in (select id from (
      select id, next_attempt_at, row_number() over (partition by account_id order by next_attempt_at) + coalesce((${running}::jsonb ->> account_id)::int, 0) as round
      from ${d} where ${d.status} = 'pending' and ${d.nextAttemptAt} <= now() and ${free}) due
      where round <= ${perAccount} order by round, next_attempt_at limit ${limit})`))
    .returning();
}

export async function markDelivered(db: Db, id: string): Promise<void> {
  await db.update(webhookDeliveries)
    .set({ status: "delivered", deliveredAt: sql`now()`, leaseUntil: null, lastError: null })
    .where(and(eq(webhookDeliveries.id, id), eq(webhookDeliveries.status, "pending")));
}

/** A failed attempt: next try after `delayMs`, or `failed` for good once the retry window is over. */
export async function markFailed(db: Db, row: DeliveryRow, error: string, delayMs: number): Promise<"retry" | "failed"> {
  const giveUp = Date.now() + delayMs > row.createdAt.getTime() + RETRY_WINDOW_MS;
  await db.update(webhookDeliveries)
    .set({ status: giveUp ? "failed" : "pending", nextAttemptAt: new Date(Date.now() + delayMs), leaseUntil: null, lastError: error.slice(0, 500) })
    .where(and(eq(webhookDeliveries.id, row.id), eq(webhookDeliveries.status, "pending")));
  return giveUp ? "failed" : "retry";
}

/** Delivered and given-up events are kept this long (for inspection), then deleted. */
export const KEEP_FINISHED_MS = 7 * 24 * 3600_000;

/** Deletes delivered and failed events older than KEEP_FINISHED_MS; pending ones stay whatever their age. Returns how many. */
export async function pruneFinished(db: Db, now = Date.now()): Promise<number> {
  const gone = await db.delete(webhookDeliveries)
    .where(and(ne(webhookDeliveries.status, "pending"), lt(webhookDeliveries.createdAt, new Date(now - KEEP_FINISHED_MS))))
    .returning({ id: webhookDeliveries.id });
  return gone.length;
}
