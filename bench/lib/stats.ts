// Small statistics helpers for the benchmark runner: percentiles over raw samples (the runner keeps
// every latency sample of a measured window, at sub-microsecond resolution) and medians over rounds.

/** Growable Float64Array of samples, cheap to append to from the hot loop of a load generator. */
export class Samples {
  private buf: Float64Array;
  length = 0;
  constructor(initial = 4096) {
    this.buf = new Float64Array(initial);
  }
  push(v: number): void {
    if (this.length === this.buf.length) {
      const next = new Float64Array(this.buf.length * 2);
      next.set(this.buf);
      this.buf = next;
    }
    this.buf[this.length++] = v;
  }
  /** Sorted copy of the samples (ascending). */
  sorted(): Float64Array {
    return this.buf.slice(0, this.length).sort();
  }
  merge(other: Samples): void {
    for (let i = 0; i < other.length; i++) this.push(other.buf[i]!);
  }
}

/** Nearest-rank percentile of an ascending array; NaN when empty. */
export function percentile(sorted: ArrayLike<number>, p: number): number {
  if (sorted.length === 0) return NaN;
  const rank = Math.ceil((p / 100) * sorted.length) - 1;
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank))]!;
}

export function median(values: number[]): number {
  const v = values.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (v.length === 0) return NaN;
  const mid = v.length >> 1;
  return v.length % 2 ? v[mid]! : (v[mid - 1]! + v[mid]!) / 2;
}

export function mean(values: number[]): number {
  const v = values.filter((x) => Number.isFinite(x));
  return v.length ? v.reduce((a, b) => a + b, 0) / v.length : NaN;
}

export interface Summary {
  count: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
}

export function summarize(s: Samples): Summary {
  const sorted = s.sorted();
  return {
    count: sorted.length,
    p50: percentile(sorted, 50),
    p90: percentile(sorted, 90),
    p99: percentile(sorted, 99),
    max: sorted.length ? sorted[sorted.length - 1]! : NaN,
  };
}
