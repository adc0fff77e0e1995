// Pricing arithmetic (src/money/pricing.ts): usage → cost from the @pydantic/genai-prices catalog
// (CONTRACT §7: cost = tokens × the model's catalog price; prompt-cache tokens priced by kind; a
// model the catalog does not know is never free on a budgeted key). No gateway: the gateway tests
// in test/relay/ check that these numbers reach the usage records.
import { flatPriceOf, PriceBook } from "../../src/money/operator-prices.ts";
import { describe, expect, test } from "bun:test";
import { calcPrice } from "@pydantic/genai-prices";
import { estimateRequest } from "../../src/money/estimate.ts";
import { costUsd, priceUsd, unitPrices } from "../../src/money/pricing.ts";
import type { Usage } from "../../src/protocols/types.ts";

// claude-haiku-4-5 in the catalog: $1/M input, $1.25/M 5-minute write, $2/M 1-hour write, $0.10/M read, $5/M output.
const EXPECTED = (100 * 1 + 1000 * 1.25 + 8000 * 2 + 500 * 0.1 + 10 * 5) / 1e6;
const usage = (u: Partial<Usage>): Usage => ({ prompt_tokens: 0, completion_tokens: 0, cached_tokens: 0, cache_write_tokens: 0, ...u });

describe("cost from the pricing catalog (CONTRACT §7)", () => {
  test("CONTRACT §7: cost = tokens × the catalog's price, the same as the catalog's own calculator", () => {
    for (const [provider, model] of [["openai", "gpt-4o-mini"], ["openai", "gpt-4o"], ["anthropic", "claude-haiku-4-5"]] as const) {
      const u = usage({ prompt_tokens: 12_345, completion_tokens: 678 });
      const want = calcPrice({ input_tokens: 12_345, output_tokens: 678 }, model, { providerId: provider })!.total_price;
      expect(want).toBeGreaterThan(0);
      expect(costUsd(provider, model, u)).toBeCloseTo(want, 12);
    }
  });
  test("CONTRACT §7: cached prompt tokens are priced at the catalog's cache-read price, the rest of the prompt at input", () => {
    // gpt-4o-mini: $0.15/M input, $0.075/M cached input, $0.60/M output.
    const u = usage({ prompt_tokens: 10_000, cached_tokens: 8_000, completion_tokens: 100 });
    expect(costUsd("openai", "gpt-4o-mini", u)).toBeCloseTo((2_000 * 0.15 + 8_000 * 0.075 + 100 * 0.6) / 1e6, 12);
    const want = calcPrice({ input_tokens: 10_000, cache_read_tokens: 8_000, output_tokens: 100 }, "gpt-4o-mini", { providerId: "openai" })!.total_price;
    expect(costUsd("openai", "gpt-4o-mini", u)).toBeCloseTo(want, 12);
  });
  test("CONTRACT §7: cached and cache-write counts above the prompt are capped by it (a prompt is never billed twice)", () => {
    const over = usage({ prompt_tokens: 1_000, cached_tokens: 5_000, completion_tokens: 0 });
    expect(costUsd("openai", "gpt-4o-mini", over)).toBeCloseTo(1_000 * 0.075 / 1e6, 12);
    const writes = usage({ prompt_tokens: 1_000, cached_tokens: 400, cache_write_tokens: 5_000 });
    expect(costUsd("anthropic", "claude-haiku-4-5", writes)).toBeCloseTo((400 * 0.1 + 600 * 1.25) / 1e6, 12);
  });
  test("CONTRACT §7: a model the catalog does not know costs 0 without a fallback, and its fallback price (marked estimated) on a budgeted key", () => {
    const u = usage({ prompt_tokens: 1_000, completion_tokens: 500 });
    expect(costUsd("openai", "no-such-model-xyz", u)).toBe(0);
    expect(unitPrices("openai", "no-such-model-xyz")).toBeNull();
    const fallback = { input: 10 / 1e6, output: 30 / 1e6 };
    expect(priceUsd("openai", "no-such-model-xyz", u, fallback)).toEqual({ usd: (1_000 * 10 + 500 * 30) / 1e6, estimated: true, source: "fallback" });
    expect(priceUsd("openai", "no-such-model-xyz", u, null)).toEqual({ usd: 0, estimated: false, source: null });
    // A known model keeps its catalog price even when a fallback is given.
    const known = priceUsd("openai", "gpt-4o-mini", u, fallback);
    expect(known.estimated).toBe(false);
    expect(known.source).toBe("catalog");
    expect(known.usd).toBeCloseTo(costUsd("openai", "gpt-4o-mini", u), 15);
  });
  test("CONTRACT §7: unit prices for estimates are the catalog's per-token input and output, and the dearest cache write", () => {
    const p = unitPrices("anthropic", "claude-haiku-4-5")!;
    expect(p.input).toBeCloseTo(1 / 1e6, 15);
    expect(p.output).toBeCloseTo(5 / 1e6, 15);
    expect(p.cacheWrite).toBeCloseTo(2 / 1e6, 15);
  });
});

describe("cache writes by TTL", () => {
  test("CONTRACT §7: 1-hour writes at the catalog's 1-hour price, 5-minute writes and reads at theirs", () => {
    const u = { prompt_tokens: 9600, completion_tokens: 10, cached_tokens: 500, cache_write_tokens: 9000, cache_write_1h_tokens: 8000 };
    expect(costUsd("anthropic", "claude-haiku-4-5", u)).toBeCloseTo(EXPECTED, 12);
    // The same writes all at 5 minutes cost less: the TTL is priced, not ignored.
    expect(costUsd("anthropic", "claude-haiku-4-5", { ...u, cache_write_1h_tokens: 0 })).toBeCloseTo((100 + 9000 * 1.25 + 50 + 50) / 1e6, 12);
  });
  test("CONTRACT §7: without a 1-hour price a 1-hour write costs 2× input (catalog model, and the unknown-model fallback)", () => {
    const u = { prompt_tokens: 1000, completion_tokens: 0, cached_tokens: 0, cache_write_tokens: 1000, cache_write_1h_tokens: 1000 };
    // gpt-4o lists no cache-write price at all ($2.50/M input).
    expect(costUsd("openai", "gpt-4o", u)).toBeCloseTo(1000 * 2 * 2.5 / 1e6, 12);
    const fallback = { input: 100 / 1e6, output: 400 / 1e6 };
    expect(priceUsd("openai", "no-such-model-xyz", u, fallback).usd).toBeCloseTo(1000 * 2 * 100 / 1e6, 12);
  });
});

describe("cache writes in the reservation", () => {
  test("CONTRACT §7: a prompt marked for the cache is reserved at the dearest write price (a 1-hour write is 2× input)", () => {
    const ctx = { config: { UNKNOWN_MODEL_PRICE_USD_PER_MTOK_INPUT: 100, UNKNOWN_MODEL_PRICE_USD_PER_MTOK_OUTPUT: 400 } } as any;
    const key = { lanes: [{ provider: "anthropic", model: null }], budgetExcludesSeats: true } as any;
    const plain = { model: "claude-haiku-4-5", max_tokens: 100, messages: [{ role: "user", content: [{ type: "text", text: "x" }] }] };
    const marked = { ...plain, messages: [{ role: "user", content: [{ type: "text", text: "x", cache_control: { type: "ephemeral", ttl: "1h" } }] }] };
    const a = estimateRequest(ctx, key, plain, 1000)!;
    const b = estimateRequest(ctx, key, marked, 1000)!;
    expect(a.usd).toBeCloseTo((1000 * 1 + 100 * 5) / 1e6, 12);
    expect(b.usd).toBeCloseTo((1000 * 2 + 100 * 5) / 1e6, 12);
  });

  test("CONTRACT §9: an operator price wins over the catalog's and the fallback, cache kinds at their own prices (absent ones at input, 1-hour writes at 2× input)", () => {
    const u = usage({ prompt_tokens: 10_000, cached_tokens: 2_000, cache_write_tokens: 3_000, cache_write_1h_tokens: 1_000, completion_tokens: 500 });
    const full = flatPriceOf({ input_per_mtok: 2, output_per_mtok: 8, cache_read_per_mtok: 0.2, cache_write_per_mtok: 2.5, cache_write_1h_per_mtok: 4 });
    const p = priceUsd("openai", "gpt-4o-mini", u, { input: 1, output: 1 }, full);
    expect(p.source).toBe("operator");
    expect(p.estimated).toBe(false);
    expect(p.usd).toBeCloseTo((5_000 * 2 + 2_000 * 0.2 + 2_000 * 2.5 + 1_000 * 4 + 500 * 8) / 1e6, 15);
    const bare = flatPriceOf({ input_per_mtok: 2, output_per_mtok: 8 });
    expect(priceUsd("openai", "gpt-6.1-sol", u, null, bare).usd).toBeCloseTo((5_000 * 2 + 2_000 * 2 + 2_000 * 2 + 1_000 * 4 + 500 * 8) / 1e6, 15);
    // The estimate reserves at the operator's price too.
    expect(unitPrices("openai", "gpt-6.1-sol", full)).toEqual({ input: 2 / 1e6, output: 8 / 1e6, cacheWrite: 4 / 1e6 });
  });
  test("CONTRACT §9: a PriceBook prefers the table's entry to the file's, per provider and model", () => {
    const book = new PriceBook();
    book.setFile([{ provider: "openai", model: "gpt-6.1-sol", input_per_mtok: 1, output_per_mtok: 2 }, { provider: "groq", model: "m", input_per_mtok: 3, output_per_mtok: 4 }]);
    book.setDb([{ provider: "openai", model: "gpt-6.1-sol", input_per_mtok: 5, output_per_mtok: 6 }]);
    expect(book.get("openai", "gpt-6.1-sol")!.input).toBeCloseTo(5 / 1e6, 15);
    expect(book.get("groq", "m")!.output).toBeCloseTo(4 / 1e6, 15);
    expect(book.get("openai", "m")).toBeNull();
  });
});
