// Counters and histograms for the hot path, exported through a prom-client Registry.
// prom-client's own update path validates and hashes the label object on every call (~0.3 µs per
// update, three updates per request); here a label combination is resolved once to a series
// object and an update is an array increment. The registry still does all the formatting: these
// classes hand it the same `get()` shape prom-client's Counter and Histogram do.
import type { Registry } from "prom-client";

type Labels = Record<string, string>;

interface MetricValue {
  labels: Labels;
  value: number;
  metricName?: string;
}

interface MetricObject {
  name: string;
  help: string;
  type: "counter" | "histogram";
  values: MetricValue[];
  aggregator: "sum";
}

function labelsOf(names: readonly string[], values: readonly string[]): Labels {
  if (values.length !== names.length) throw new Error(`expected ${names.length} label values (${names.join(", ")}), got ${values.length}`);
  const out: Labels = {};
  for (let i = 0; i < names.length; i++) out[names[i]!] = values[i]!;
  return out;
}

abstract class FastMetric<S> {
  readonly aggregator = "sum" as const;
  protected series = new Map<string, S>();

  constructor(readonly name: string, readonly help: string, readonly labelNames: readonly string[], registry: Registry) {
    // The registry formats whatever get() returns; it only needs name, type and get().
    registry.registerMetric(this as unknown as Parameters<Registry["registerMetric"]>[0]);
  }

  /** The series for these label values, created on first use; keep it and update it directly. */
  labels(...values: string[]): S {
    const key = values.join("\u0000");
    let s = this.series.get(key);
    if (!s) {
      s = this.create(labelsOf(this.labelNames, values));
      this.series.set(key, s);
    }
    return s;
  }

  protected abstract create(labels: Labels): S;
}

export class CounterSeries {
  value = 0;
  constructor(readonly labels: Labels) {}
  inc(by = 1): void {
    this.value += by;
  }
}

export class FastCounter extends FastMetric<CounterSeries> {
  readonly type = "counter" as const;
  protected create(labels: Labels) {
    return new CounterSeries(labels);
  }
  get(): MetricObject {
    const values: MetricValue[] = [];
    for (const s of this.series.values()) values.push({ labels: s.labels, value: s.value });
    return { name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator };
  }
}

export class HistogramSeries {
  /** Per-bucket (not cumulative) counts; the last slot is +Inf. */
  readonly counts: Float64Array;
  sum = 0;
  count = 0;
  constructor(readonly labels: Labels, private readonly bounds: readonly number[]) {
    this.counts = new Float64Array(bounds.length + 1);
  }
  observe(v: number): void {
    const b = this.bounds;
    let i = 0;
    while (i < b.length && v > b[i]!) i++;
    this.counts[i]!++;
    this.sum += v;
    this.count++;
  }
}

export class FastHistogram extends FastMetric<HistogramSeries> {
  readonly type = "histogram" as const;
  constructor(name: string, help: string, labelNames: readonly string[], readonly buckets: readonly number[], registry: Registry) {
    super(name, help, labelNames, registry);
    if (buckets.some((b, i) => i > 0 && b <= buckets[i - 1]!)) throw new Error(`${name}: buckets must increase`);
  }
  protected create(labels: Labels) {
    return new HistogramSeries(labels, this.buckets);
  }
  get(): MetricObject {
    const values: MetricValue[] = [];
    for (const s of this.series.values()) {
      let acc = 0;
      for (let i = 0; i <= this.buckets.length; i++) {
        acc += s.counts[i]!;
        const le = i < this.buckets.length ? String(this.buckets[i]) : "+Inf";
        values.push({ labels: { ...s.labels, le }, value: acc, metricName: `${this.name}_bucket` });
      }
      values.push({ labels: s.labels, value: s.sum, metricName: `${this.name}_sum` });
      values.push({ labels: s.labels, value: s.count, metricName: `${this.name}_count` });
    }
    return { name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator };
  }
}
