// The lanes of one request, tried in order until one answers (CONTRACT §8): a failed lane moves on,
// and once none served, the verdict picks the client's error from every lane's failure.
import type { GatewayError } from "../errors.ts";
import type { ResolvedLane } from "../providers/types.ts";
import { tryLane, type LaneResult, type RelayRequest } from "./attempt.ts";
import { allLanesFailed, upstreamAuthFailed, type LaneFailure } from "./relay-errors.ts";
import { GO, PROBE, type LaneCooldowns } from "./routing/cooldowns.ts";
import { affinityResult } from "./routing/affinity.ts";

/** Walks the planned lanes in order; each call to next() resumes after the last lane tried. */
export class LaneRunner {
  private i = 0;
  private last: LaneFailure | null = null;
  /** Every lane failure of this request, in order. */
  private failures: LaneFailure[] = [];
  /** Lanes passed over because they were cooling. */
  private skipped: ResolvedLane[] | null = null;
  /** Lanes this request tried. */
  private tries = 0;

  /** The provider of the last lane tried, for the request's metrics when every lane failed. */
  get lastProvider(): string | null {
    return this.last?.provider ?? null;
  }

  constructor(private rr: RelayRequest, private lanes: ResolvedLane[]) {}

  /**
   * The next lane that answers (or an error for the client); a failed lane moves on. A cooling lane
   * is skipped (routing/cooldowns.ts); when every lane was skipped, the one that cools off first is
   * tried anyway (CONTRACT §9), so a key never answers without asking an upstream.
   */
  async next(): Promise<LaneResult> {
    const cooldowns = this.rr.ctx.services.cooldowns;
    while (this.i < this.lanes.length) {
      const lane = this.lanes[this.i++]!;
      const gate = cooldowns.gate(lane);
      if (gate !== GO && !(gate === PROBE && (await cooldowns.probe(lane)))) {
        (this.skipped ??= []).push(lane);
        this.rr.access.laneSkipped(lane.provider, lane.index);
        continue;
      }
      const r = await this.attempt(lane, gate === PROBE);
      if (r) return r;
    }
    if (this.tries === 0 && this.skipped) {
      const lane = this.soonest(this.skipped, cooldowns);
      this.skipped = null;
      const r = await this.attempt(lane, false);
      if (r) return r;
    }
    return { kind: "client", error: this.verdict() };
  }

  /** The skipped lane whose cooldown ends first (chain order breaks ties). */
  private soonest(lanes: ResolvedLane[], cooldowns: Pick<LaneCooldowns, "untilOf">): ResolvedLane {
    let best = lanes[0]!;
    let bestUntil = cooldowns.untilOf(best) ?? 0;
    for (const l of lanes) {
      const u = cooldowns.untilOf(l) ?? 0;
      if (u < bestUntil) [best, bestUntil] = [l, u];
    }
    return best;
  }

  /** One lane's attempt: its result, or null when it failed and the next lane is up. */
  private async attempt(lane: ResolvedLane, probe: boolean): Promise<LaneResult | null> {
    const rr = this.rr;
    this.tries++;
    const tried = rr.access.laneStarted(lane.provider, lane.index);
    const r = await tryLane(rr, lane);
    tried.status = r.kind === "json" || r.kind === "body" ? r.status : r.kind === "stream" ? r.res.status : r.kind === "failed" ? r.failure.status : 0;
    const cooldowns = rr.ctx.services.cooldowns;
    if (r.kind === "failed") {
      this.failed(r.failure, probe);
      if (rr.signal.aborted) return { kind: "aborted" };
      return null;
    }
    // The upstream answered (a refusal of the request itself included): the lane is well.
    if (r.kind === "aborted") cooldowns.forget(lane);
    else if (r.kind !== "uncounted") cooldowns.succeeded(lane);
    // An answer: the session sticks to the lane that gave it (CONTRACT §9).
    if (rr.affinity && (r.kind === "json" || r.kind === "body" || r.kind === "stream")) {
      rr.access.affinity = affinityResult(rr.affinity, lane);
      rr.ctx.services.affinity.remember(rr.affinity, lane);
    }
    return r;
  }

  /**
   * CONTRACT §8, once no lane served: the client's 4xx (unsupported_feature, model_not_found)
   * when every lane refused the request itself; 502 upstream_auth_failed when the others were
   * refused saved keys; else 502 upstream_error (a retry or another lane may help).
   */
  private verdict(): GatewayError {
    const fs = this.failures;
    const clientFix = fs.find((f) => f.error);
    if (clientFix && fs.every((f) => f.error)) return clientFix.error!;
    if (fs.some((f) => f.hint) && fs.every((f) => f.error || f.hint)) return upstreamAuthFailed(fs);
    return allLanesFailed(this.lanes.length, this.last, fs.find((f) => f.hint)?.hint);
  }

  /** Records a lane's failure (also used by the stream driver for a stream broken before content). */
  failed(f: LaneFailure, probe = false): void {
    this.last = f;
    this.failures.push(f);
    const rr = this.rr;
    const lane = this.lanes.find((l) => l.index === f.laneIndex);
    if (lane) rr.ctx.services.cooldowns.failed(lane, f, probe);
    const fellBack = this.i < this.lanes.length;
    rr.access.laneFailed(f.laneIndex, f.status, f.code, fellBack);
    if (fellBack) {
      // A routine event (the next lane takes over): a warning without a stack.
      rr.ctx.log.warn({ requestId: rr.requestId, provider: f.provider, lane: f.laneIndex, status: f.status, code: f.code }, "lane failed; trying the next lane");
    }
  }
}
