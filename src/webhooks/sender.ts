// Sends the outbox (outbox.ts): the instance that queues an event nudges its sender, and every
// instance polls for due retries (pollMs), claiming a few deliveries at a time. A webhook is
// POSTed with its Gateway-Signature (signature.ts), to the address its URL resolves to now,
// checked against private ranges like a bridge's (unless ALLOW_PRIVATE_UPSTREAMS),
// never following a redirect; a 2xx is success, anything else (no answer within
// ATTEMPT_TIMEOUT_MS included) is retried with exponential backoff
// (WEBHOOK_RETRY_BASE_SECONDS doubling, at most an hour apart) for 24 hours. An email goes through
// the gateway's mailer. Once an attempt succeeded this instance never sends it again, even when
// recording the success failed (it keeps trying to record it instead). Accounts share the sender
// fairly: at most PER_ACCOUNT_IN_FLIGHT of one account's deliveries run at once on an instance,
// and each free place goes to the account whose oldest due delivery has waited its turn.
import type { Base } from "../base.ts";
import type { Mailer } from "../mail/mailer.ts";
import { GatewayError } from "../errors.ts";
import { intervalJob, type Job } from "../jobs/job.ts";
import { resolveAndCheck } from "../net/ssrf.ts";
import { pinnedTarget } from "../providers/bridge/connect.ts";
import { claimDue, markDelivered, markFailed, pruneFinished, type DeliveryRow } from "./outbox.ts";
import { webhookSecret } from "./secret.ts";
import { SIGNATURE_HEADER, signatureHeader } from "./signature.ts";

/**
 * How often an instance looks for due deliveries: half the first retry's delay, between 1 and 5 s.
 * A new event needs no poll (the instance that queued it nudges its sender); the poll finds
 * retries coming due and deliveries whose sender died, and costs every instance one statement
 * per poll, so a fleet's count of them grows with its instances.
 */
export const pollMs = (retryBaseSeconds: number) => Math.min(5000, Math.max(1000, (retryBaseSeconds * 1000) / 2));
/** Deliveries one instance runs at once, all accounts together. */
export const MAX_IN_FLIGHT = 32;
/**
 * Deliveries of one account one instance runs at once: a receiver that hangs holds at most this
 * many of the sender's places, and every other account's deliveries take the rest, each account's
 * oldest first (claimDue's rounds). Earlier the sender took 25 due rows in order and waited for the
 * whole batch, so one account's hanging receiver held every other account's events for a timeout
 * per 25 of its own.
 */
export const PER_ACCOUNT_IN_FLIGHT = 4;
/**
 * One attempt's limit: a receiver should answer at once and do its work later (a slower one is
 * retried). Short, so an account's hanging receiver gives its places back soon.
 */
export const ATTEMPT_TIMEOUT_MS = 5_000;
const MAX_DELAY_MS = 3600_000;
/** How often finished events past their keeping time are deleted. */
const PRUNE_MS = 10 * 60_000;

/** Delay before attempt `attempts + 1`: base × 2^(attempts-1), at most an hour, ±20 % jitter. */
export function retryDelayMs(attempts: number, baseMs: number): number {
  const d = Math.min(MAX_DELAY_MS, baseMs * 2 ** Math.max(0, attempts - 1));
  return Math.round(d * (0.8 + Math.random() * 0.4));
}

export interface WebhookSender extends Job {
  /** Look for due deliveries now (an event was just queued here). */
  nudge(): void;
}

export function webhookSender(ctx: Base, mailer: Mailer): WebhookSender {
  /** Delivered here, success not yet recorded: never sent again by this instance. */
  const unrecorded = new Set<string>();
  const record = async (id: string) => {
    unrecorded.add(id);
    await markDelivered(ctx.db, id);
    unrecorded.delete(id);
  };

  async function attempt(row: DeliveryRow, secrets: Map<string, Promise<string>>): Promise<string | null> {
    if (row.channel === "email") {
      const body = JSON.parse(row.body) as { type: string; data: { message?: string } };
      await mailer.send({ to: row.target, subject: `Gateway: ${body.type}`, text: `${body.data.message ?? body.type}\n\n${row.body}\n`, kind: body.type });
      return null;
    }
    let secret = secrets.get(row.accountId);
    if (!secret) secrets.set(row.accountId, (secret = webhookSecret(ctx, row.accountId)));
    const url = new URL(row.target);
    let target: { url: string; host?: string; serverName?: string } = { url: row.target };
    if (!ctx.config.ALLOW_PRIVATE_UPSTREAMS) {
      const addresses = await resolveAndCheck(ctx, url, "webhook_url");
      target = pinnedTarget(row.target, addresses[0]!);
    }
    const headers: Record<string, string> = {
      "content-type": "application/json",
      "user-agent": "model-gateway-webhooks/1",
      "gateway-event-id": row.id,
      [SIGNATURE_HEADER.toLowerCase()]: signatureHeader(await secret, row.body),
    };
    if (target.host) headers.host = target.host;
    const init: RequestInit & { tls?: { serverName?: string } } = { method: "POST", headers, body: row.body, redirect: "manual", signal: AbortSignal.timeout(ATTEMPT_TIMEOUT_MS) };
    if (target.serverName) init.tls = { serverName: target.serverName };
    const res = await fetch(target.url, init);
    await res.body?.cancel().catch(() => {});
    if (res.status >= 200 && res.status < 300) return null;
    return res.status >= 300 && res.status < 400
      ? `The receiver answered with a redirect (${res.status}); webhooks do not follow redirects.`
      : `The receiver answered HTTP ${res.status}.`;
  }

  async function deliver(row: DeliveryRow, secrets: Map<string, Promise<string>>): Promise<void> {
    if (unrecorded.has(row.id)) return record(row.id);
    let error: string | null;
    try {
      error = await attempt(row, secrets);
    } catch (e) {
      error = e instanceof GatewayError ? e.message
        : e instanceof Error && (e.name === "TimeoutError" || e.name === "AbortError") ? `The receiver did not answer within ${ATTEMPT_TIMEOUT_MS / 1000} s.`
        : `The delivery failed: ${e instanceof Error ? e.message : String(e)}`;
    }
    if (error === null) {
      ctx.log.info({ event: row.id, type: row.eventType, channel: row.channel, attempts: row.attempts }, "webhook delivered");
      return record(row.id);
    }
    const outcome = await markFailed(ctx.db, row, error, retryDelayMs(row.attempts, ctx.config.WEBHOOK_RETRY_BASE_SECONDS * 1000));
    ctx.log.warn({ event: row.id, type: row.eventType, channel: row.channel, attempts: row.attempts, outcome, error }, "webhook attempt failed");
  }

  /** Deliveries under way on this instance, by account. */
  const busy = new Map<string, number>();
  const running = new Set<Promise<void>>();
  let inFlight = 0;
  let job: Job;

  const start = (row: DeliveryRow, secrets: Map<string, Promise<string>>) => {
    inFlight++;
    busy.set(row.accountId, (busy.get(row.accountId) ?? 0) + 1);
    const p: Promise<void> = deliver(row, secrets)
      .catch((e) => ctx.log.error({ event: row.id, err: e instanceof Error ? e.message : String(e) }, "webhook outcome not recorded"))
      .finally(() => {
        inFlight--;
        const n = (busy.get(row.accountId) ?? 1) - 1;
        if (n > 0) busy.set(row.accountId, n);
        else busy.delete(row.accountId);
        running.delete(p);
        // A place came free: the next due delivery (of any account) takes it now, not at the poll.
        if (!stopping) void job.runOnce();
      });
    running.add(p);
  };

  let prunedAt = 0;
  let stopping = false;
  const tick = async () => {
    for (const id of [...unrecorded]) await record(id);
    if (Date.now() - prunedAt > PRUNE_MS) {
      prunedAt = Date.now();
      await pruneFinished(ctx.db);
    }
    // Fills the free places and returns: deliveries run on their own, each freeing its place.
    while (!stopping && inFlight < MAX_IN_FLIGHT) {
      const room = MAX_IN_FLIGHT - inFlight;
      const due = await claimDue(ctx.db, room, PER_ACCOUNT_IN_FLIGHT, busy);
      const secrets = new Map<string, Promise<string>>();
      for (const row of due) start(row, secrets);
      if (due.length < room) return;
    }
  };
  job = intervalJob(ctx, "webhooks", pollMs(ctx.config.WEBHOOK_RETRY_BASE_SECONDS), tick);
  return {
    ...job,
    nudge: () => void job.runOnce(),
    start() {
      stopping = false;
      job.start();
    },
    // Shutdown waits for the attempts under way (each at most ATTEMPT_TIMEOUT_MS) and records them.
    async stop() {
      stopping = true;
      await job.stop();
      while (running.size) await Promise.all([...running]);
    },
  };
}
