// Usage → cost in USD, from @pydantic/genai-prices: the pricing catalog maintained by Pydantic,
// covering the vendors we route to with per-model input, output and cached-token (cache read and
// write) prices, so no price table is kept by hand here.
//
// calcPrice matches model names against the whole catalog (tens of µs per call), too slow for
// every request: the matched flat price of a provider+model is memoised and applied here.
// Models whose price varies (token tiers, time-of-day or date-bound prices) go through
// calcPrice on every call, so they are always priced exactly as the catalog says.
import { calcPrice, type ModelPrice } from "@pydantic/genai-prices";
import type { Usage } from "../protocols/types.ts";

export interface FlatPrice {
  input: number;
  output: number;
  cacheRead: number;
  /** A 5-minute cache write (the catalog's cache_write_mtok). */
  cacheWrite: number;
  /** A 1-hour cache write: the catalog's cache_write_1h_mtok, else 2× input (CONTRACT §7). */
  cacheWrite1h: number;
}

/** null = not in the catalog; "dynamic" = price depends on the call, use calcPrice each time. */
type Entry = FlatPrice | "dynamic" | null;

// A pure memo of immutable catalog data (no gateway state), shared by every instance in the process:
// pricing id → model → entry (two lookups, no key string built per request).
const memo = new Map<string, Map<string, Entry>>();
let memoSize = 0;
const MEMO_MAX = 5000;

function isNum(v: unknown): v is number {
  return typeof v === "number" && Number.isFinite(v);
}

function lookup(pricingId: string, model: string): Entry {
  let byModel = memo.get(pricingId);
  let e = byModel?.get(model);
  if (e !== undefined) return e;
  const r = calcPrice({ input_tokens: 1, output_tokens: 1 }, model, { providerId: pricingId });
  if (!r) e = null;
  else if (Array.isArray(r.model.prices)) e = "dynamic";
  else {
    const p: ModelPrice & { cache_write_1h_mtok?: unknown } = r.model_price;
    const input = p.input_mtok, output = p.output_mtok;
    const read = p.cache_read_mtok ?? input, write = p.cache_write_mtok ?? input;
    const write1h = p.cache_write_1h_mtok ?? (isNum(input) ? 2 * input : undefined);
    e = isNum(input) && isNum(output) && isNum(read) && isNum(write) && isNum(write1h)
      ? { input: input / 1e6, output: output / 1e6, cacheRead: read / 1e6, cacheWrite: write / 1e6, cacheWrite1h: write1h / 1e6 }
      : "dynamic";
  }
  if (memoSize >= MEMO_MAX) {
    memo.clear();
    memoSize = 0;
    byModel = undefined;
  }
  if (!byModel) memo.set(pricingId, (byModel = new Map()));
  byModel.set(model, e);
  memoSize++;
  return e;
}

export interface UnitPrices {
  input: number;
  output: number;
  /** The dearest price of an input token written to the cache (absent: never above input). */
  cacheWrite?: number;
}

/** Where an attempt's price came from (the record's price_source, CONTRACT §9). */
export type PriceSource = "catalog" | "operator" | "fallback";

/**
 * Cost of one attempt in USD. The operator's price (`operator`) wins over the catalog's; a model
 * neither knows costs `fallback` per token when one is given (keys with a budget: never free) and
 * 0 otherwise (source null: nothing priced it); `estimated` is true for the fallback.
 */
export function priceUsd(pricingId: string, model: string, u: Usage, fallback: UnitPrices | null, operator: FlatPrice | null = null): { usd: number; estimated: boolean; source: PriceSource | null } {
  if (operator) return { usd: flatCost(operator, u), estimated: false, source: "operator" };
  const known = lookup(pricingId, model) !== null;
  if (fallback && !known) {
    // 1-hour cache writes cost 2× input where no price is known: one more input price each.
    const write1h = Math.min(u.cache_write_1h_tokens ?? 0, u.cache_write_tokens, u.prompt_tokens);
    return { usd: (u.prompt_tokens + write1h) * fallback.input + u.completion_tokens * fallback.output, estimated: true, source: "fallback" };
  }
  return { usd: costUsd(pricingId, model, u), estimated: false, source: known ? "catalog" : null };
}

/**
 * Who prices `model` today: the operator, the catalog, or nobody (null: a budgeted key pays the
 * fallback, a key without a budget records $0). What the dashboard flags as used without a price.
 */
export function priceSourceOf(pricingId: string, model: string, operator: FlatPrice | null): "operator" | "catalog" | null {
  if (operator) return "operator";
  return lookup(pricingId, model) !== null ? "catalog" : null;
}

/** A flat price applied to one attempt's tokens: cache reads, 5-minute and 1-hour writes each at their own price. */
function flatCost(e: FlatPrice, u: Usage): number {
  const cached = Math.min(u.cached_tokens, u.prompt_tokens);
  const write = Math.min(u.cache_write_tokens, u.prompt_tokens - cached);
  const write1h = Math.min(u.cache_write_1h_tokens ?? 0, write);
  return (u.prompt_tokens - cached - write) * e.input + cached * e.cacheRead + (write - write1h) * e.cacheWrite + write1h * e.cacheWrite1h + u.completion_tokens * e.output;
}

/** Cost of one attempt in USD; 0 for a model the catalog does not know. */
export function costUsd(pricingId: string, model: string, u: Usage): number {
  const e = lookup(pricingId, model);
  if (e === null) return 0;
  if (e !== "dynamic") return flatCost(e, u);
  const cached = Math.min(u.cached_tokens, u.prompt_tokens);
  const write = Math.min(u.cache_write_tokens, u.prompt_tokens - cached);
  // Cache writes are priced by their TTL: 1-hour writes above 5-minute ones.
  const write1h = Math.min(u.cache_write_1h_tokens ?? 0, write);
  const r = calcPrice(
    { input_tokens: u.prompt_tokens, cache_read_tokens: cached, cache_write_tokens: write, cache_write_1h_tokens: write1h, output_tokens: u.completion_tokens } as Parameters<typeof calcPrice>[0],
    model,
    { providerId: pricingId },
  );
  return r ? r.total_price : 0;
}

/**
 * Price per token (input, output) for budget estimates; dynamic prices are sampled at a large
 * prompt so tiers err high. The operator's price, when there is one, is the price.
 */
export function unitPrices(pricingId: string, model: string, operator: FlatPrice | null = null): UnitPrices | null {
  if (operator) return { input: operator.input, output: operator.output, cacheWrite: Math.max(operator.cacheWrite, operator.cacheWrite1h) };
  const e = lookup(pricingId, model);
  if (e === null) return null;
  if (e !== "dynamic") return { input: e.input, output: e.output, cacheWrite: Math.max(e.cacheWrite, e.cacheWrite1h) };
  const k = `${pricingId}\u0000${model}`;
  const hit = dynamicUnits.get(k);
  if (hit && Date.now() - hit.at < 60_000) return hit.v;
  const big = 1_000_000;
  const i = calcPrice({ input_tokens: big, output_tokens: 0 }, model, { providerId: pricingId });
  const o = calcPrice({ input_tokens: big, output_tokens: big }, model, { providerId: pricingId });
  const v = i && o ? { input: i.total_price / big, output: Math.max(0, o.total_price - i.total_price) / big } : null;
  if (dynamicUnits.size >= MEMO_MAX) dynamicUnits.clear();
  dynamicUnits.set(k, { at: Date.now(), v });
  return v;
}

// Estimates of time-dependent prices are re-sampled every minute.
const dynamicUnits = new Map<string, { at: number; v: { input: number; output: number } | null }>();

/** Every model the catalog lists for a provider (the general `GET /v1/models` list). */
export { findProvider as catalogProvider } from "@pydantic/genai-prices";
