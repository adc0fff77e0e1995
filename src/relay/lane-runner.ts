// The lanes of one request, tried in order until one answers (CONTRACT §8): a failed lane moves on,
// and once none served, the verdict picks the client's error from every lane's failure.
import type { GatewayError } from "../errors.ts";
import type { ResolvedLane } from "../providers/types.ts";
import { tryLane, type LaneResult, type RelayRequest } from "./attempt.ts";
import { allLanesFailed, upstreamAuthFailed, type LaneFailure } from "./relay-errors.ts";

/** Walks the planned lanes in order; each call to next() resumes after the last lane tried. */
export class LaneRunner {
  private i = 0;
  private last: LaneFailure | null = null;
  /** Every lane failure of this request, in order. */
  private failures: LaneFailure[] = [];

  /** The provider of the last lane tried, for the request's metrics when every lane failed. */
  get lastProvider(): string | null {
    return this.last?.provider ?? null;
  }

  constructor(private rr: RelayRequest, private lanes: ResolvedLane[]) {}

  /** The next lane that answers (or an error for the client); a failed lane moves on. */
  async next(): Promise<LaneResult> {
    while (this.i < this.lanes.length) {
      const lane = this.lanes[this.i++]!;
      const tried = this.rr.access.laneStarted(lane.provider, lane.index);
      const r = await tryLane(this.rr, lane);
      tried.status = r.kind === "json" || r.kind === "body" ? r.status : r.kind === "stream" ? r.res.status : r.kind === "failed" ? r.failure.status : 0;
      if (r.kind !== "failed") return r;
      this.failed(r.failure);
      if (this.rr.signal.aborted) return { kind: "aborted" };
    }
    return { kind: "client", error: this.verdict() };
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
  failed(f: LaneFailure): void {
    this.last = f;
    this.failures.push(f);
    const rr = this.rr;
    const fellBack = this.i < this.lanes.length;
    rr.access.laneFailed(f.laneIndex, f.status, f.code, fellBack);
    if (fellBack) {
      // A routine event (the next lane takes over): a warning without a stack.
      rr.ctx.log.warn({ requestId: rr.requestId, provider: f.provider, lane: f.laneIndex, status: f.status, code: f.code }, "lane failed; trying the next lane");
    }
  }
}
