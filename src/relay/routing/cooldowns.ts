// Lane cooldowns (CONTRACT §9, docs/behaviour.md): a lane that keeps failing for a retryable cause
// is skipped by every instance until its cooldown ends, then one probe at a time tests it.
//
// The shared state lives in the KV (store/kv/lane-cooldown.ts for the rules, lane-scripts.ts for
// Redis), keyed by the lane's identity: its provider and what it calls with (saved key, sub session
// or bridge), so every routing key wired to the same credential shares it. The request path never
// asks the store whether a lane is cooling: each instance holds the cooling set in memory, filled
// from its own failures' answers and from the others' over pub/sub, and reads it with one Map
// lookup per lane (an empty Map when nothing cools). The store is asked only on the failure path,
// for the probe of a lane whose cooldown ended, and once when a lane that had failed serves again.
// A message missed (a reconnect) heals itself: a lane believed healthy fails once more and the
// store's answer says it cools; one believed cooling is probed when its time is up.
import type { Config } from "../../config.ts";
import type { Logger } from "../../logger.ts";
import type { ResolvedLane } from "../../providers/types.ts";
import type { CooldownPolicy } from "../../store/kv/lane-cooldown.ts";
import type { KV } from "../../store/kv/types.ts";
import type { LaneFailure } from "../relay-errors.ts";

type LaneRef = Pick<ResolvedLane, "provider" | "credential_id" | "sub_session_id" | "bridge_instance_id">;

/** A lane's identity across routing keys and instances: its provider and what it calls with. */
export function laneIdentity(lane: LaneRef): string {
  return `${lane.provider}:${lane.credential_id ?? lane.sub_session_id ?? lane.bridge_instance_id ?? "-"}`;
}

/** Whether a lane failure says the lane is unwell (and counts toward its cooldown), not that the request was refused. */
export function coolsLane(f: Pick<LaneFailure, "status" | "code">): boolean {
  return f.code === "connection_failed" || f.code === "timeout" || f.code === "stream_broken" || f.status === 429 || f.status >= 500;
}

/** The longest Retry-After honoured, whatever the vendor says: a day. */
const MAX_RETRY_AFTER_MS = 24 * 3600 * 1000;

/**
 * An upstream's Retry-After in ms: `retry-after-ms` (milliseconds) or `retry-after` (seconds, or an
 * HTTP date), null when absent or unreadable.
 */
export function retryAfterMs(headers: Headers, now = Date.now()): number | null {
  const ms = headers.get("retry-after-ms");
  if (ms !== null && /^\s*\d+(\.\d+)?\s*$/.test(ms)) return Math.min(MAX_RETRY_AFTER_MS, Math.round(Number(ms)));
  const v = headers.get("retry-after");
  if (v === null) return null;
  if (/^\s*\d+(\.\d+)?\s*$/.test(v)) return Math.min(MAX_RETRY_AFTER_MS, Math.round(Number(v) * 1000));
  const at = Date.parse(v);
  return Number.isFinite(at) ? Math.min(MAX_RETRY_AFTER_MS, Math.max(0, at - now)) : null;
}

/** What the request path does with a lane: try it, skip it (cooling), or ask the store for the probe. */
export const GO = 0, SKIP = 1, PROBE = 2;
export type Gate = typeof GO | typeof SKIP | typeof PROBE;

interface Cooling {
  provider: string;
  /** The cooldown's end (ms since epoch). */
  untilMs: number;
  level: number;
  /** Skip until then: a probe is out (this instance's or another's). */
  heldUntilMs: number;
}

export type CooldownConfig = Pick<Config, "LANE_COOLDOWN_FAILURES" | "LANE_COOLDOWN_WINDOW_SECONDS" | "LANE_COOLDOWN_BASE_SECONDS" | "LANE_COOLDOWN_MAX_SECONDS" | "UPSTREAM_TIMEOUT_SECONDS">;

export interface CooldownDeps {
  config: CooldownConfig;
  kv: KV;
  log: Logger;
  instanceId: string;
  /** The fleet's namespace of shared keys (store/kv/index.ts fleetNamespace). */
  namespace: string;
}

export class LaneCooldowns {
  private cooling = new Map<string, Cooling>();
  /** Lanes this instance saw fail without cooling yet: their first success clears the store's count. */
  private failing = new Set<string>();
  private readonly policy: CooldownPolicy;
  private readonly probeTtlMs: number;
  private readonly channel: string;
  readonly enabled: boolean;
  /** Cooldowns this instance started, by provider (the metric's counter reads it). */
  onCooled: ((provider: string) => void) | null = null;

  constructor(private deps: CooldownDeps) {
    const c = deps.config;
    this.enabled = c.LANE_COOLDOWN_FAILURES > 0;
    this.policy = {
      threshold: c.LANE_COOLDOWN_FAILURES,
      windowMs: c.LANE_COOLDOWN_WINDOW_SECONDS * 1000,
      baseMs: c.LANE_COOLDOWN_BASE_SECONDS * 1000,
      maxMs: c.LANE_COOLDOWN_MAX_SECONDS * 1000,
    };
    // A probe holds the lane for as long as its attempt may take, and a little more.
    this.probeTtlMs = c.UPSTREAM_TIMEOUT_SECONDS * 1000 + 5000;
    this.channel = `${deps.namespace}:lanes`;
  }

  private key(id: string): string {
    return `${this.deps.namespace}:{l:${id}}:cd`;
  }

  /** Listens to the other instances' cooldowns and recoveries. */
  async start(): Promise<void> {
    if (!this.enabled || this.deps.kv.kind !== "redis") return;
    await this.deps.kv.subscribe(this.channel, (m) => this.heard(m));
  }

  /** "c\t<instance>\t<lane>\t<provider>\t<until>\t<level>" or "r\t<instance>\t<lane>". */
  private heard(m: string): void {
    const p = m.split("\t");
    if (p[1] === this.deps.instanceId || !p[2]) return;
    if (p[0] === "c") this.hold(p[2], p[3] ?? "", Number(p[4]) || 0, Number(p[5]) || 0);
    else if (p[0] === "r") this.cooling.delete(p[2]);
  }

  private tell(m: string): void {
    if (this.deps.kv.kind !== "redis") return;
    this.deps.kv.publish(this.channel, m).catch(() => {});
  }

  private hold(id: string, provider: string, untilMs: number, level: number): void {
    const e = this.cooling.get(id);
    if (e) {
      e.untilMs = Math.max(e.untilMs, untilMs);
      e.level = Math.max(e.level, level);
    } else this.cooling.set(id, { provider, untilMs, level, heldUntilMs: 0 });
  }

  /** The hot path's question, answered from memory: try the lane, skip it, or ask for the probe. Nothing cooling: one size check. */
  gate(lane: LaneRef, now = Date.now()): Gate {
    if (this.cooling.size === 0) return GO;
    const e = this.cooling.get(laneIdentity(lane));
    if (!e) return GO;
    if (e.untilMs > now || e.heldUntilMs > now) return SKIP;
    return PROBE;
  }

  /** The end of the lane's cooldown, or null when it is not cooling (a probe due counts as not cooling). */
  untilOf(lane: LaneRef, now = Date.now()): number | null {
    if (this.cooling.size === 0) return null;
    const e = this.cooling.get(laneIdentity(lane));
    return e && e.untilMs > now ? e.untilMs : null;
  }

  /** Lanes cooling now, by provider (the gauge, read at scrape time). */
  coolingByProvider(now = Date.now()): Map<string, number> {
    const out = new Map<string, number>();
    for (const e of this.cooling.values()) if (e.untilMs > now) out.set(e.provider, (out.get(e.provider) ?? 0) + 1);
    return out;
  }

  /**
   * Whether this request may be the lane's probe. The store grants one probe fleet-wide; a refusal
   * says until when to keep skipping. A store that cannot be asked lets the request try the lane.
   */
  async probe(lane: LaneRef): Promise<boolean> {
    const id = laneIdentity(lane);
    const e = this.cooling.get(id);
    if (!e) return true;
    const now = Date.now();
    // Held before the answer: this instance's other requests skip the lane meanwhile.
    e.heldUntilMs = now + this.probeTtlMs;
    try {
      const v = await this.deps.kv.laneProbe(this.key(id), this.probeTtlMs);
      if (v.granted) {
        if (v.level === 0) this.cooling.delete(id);
        return true;
      }
      // Still cooling (another instance cooled it again) or another probe is out: skip it until then.
      e.heldUntilMs = v.untilMs;
      return false;
    } catch (err) {
      this.deps.log.warn({ lane: id, err: err instanceof Error ? err.message : String(err) }, "lane cooldown store unreachable: trying the lane");
      e.heldUntilMs = 0;
      return true;
    }
  }

  /** A lane failed (off the request path: the request moves on at once). `probe`: it was the lane's probe. */
  failed(lane: LaneRef, f: LaneFailure, probe: boolean): void {
    if (!this.enabled || !coolsLane(f)) return;
    const id = laneIdentity(lane);
    const provider = lane.provider;
    const call = {
      ...this.policy,
      retryAfterMs: f.retryAfterMs ?? null,
      immediate: f.code === "connection_failed",
      probe,
    };
    this.deps.kv.laneFailed(this.key(id), call).then((v) => {
      if (v.untilMs > Date.now()) {
        this.failing.delete(id);
        const e = this.cooling.get(id);
        if (e) {
          e.untilMs = v.untilMs;
          e.level = v.level;
          e.heldUntilMs = 0;
        } else this.hold(id, provider, v.untilMs, v.level);
        if (v.cooled) {
          this.onCooled?.(provider);
          this.deps.log.warn({ lane: id, level: v.level, coolingMs: v.untilMs - Date.now() }, "lane cooling down: it is skipped until then");
          this.tell(`c\t${this.deps.instanceId}\t${id}\t${provider}\t${v.untilMs}\t${v.level}`);
        }
      } else this.failing.add(id);
    }, (err: unknown) => {
      this.deps.log.warn({ lane: id, err: err instanceof Error ? err.message : String(err) }, "lane failure not counted: the cooldown store is unreachable");
    });
  }

  /** A lane answered: a lane that was cooling (its probe served) or had failed here starts afresh everywhere. */
  succeeded(lane: LaneRef): void {
    if (this.cooling.size === 0 && this.failing.size === 0) return;
    const id = laneIdentity(lane);
    const was = this.cooling.delete(id);
    if (!this.failing.delete(id) && !was) return;
    this.deps.kv.del(this.key(id)).catch(() => {});
    if (was) this.tell(`r\t${this.deps.instanceId}\t${id}`);
  }

  /** The request gave up on the lane without a verdict (the client left): its probe, if it was one, frees itself when it expires. */
  forget(lane: LaneRef): void {
    if (this.cooling.size === 0) return;
    const e = this.cooling.get(laneIdentity(lane));
    if (e) e.heldUntilMs = 0;
  }
}
