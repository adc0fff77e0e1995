// Output-limit arithmetic (src/money/output-limits.ts, and the lowering in estimate.ts):
// what a request is reserved for and what the lane is allowed to answer (CONTRACT §7: the worst
// case is the client's max_tokens / max_completion_tokens / max_output_tokens, else the model's
// maximum output, times n; what goes upstream after translation never asks for more). No gateway.
import { describe, expect, test } from "bun:test";
import { outputLimitFor } from "../../src/money/estimate.ts";
import {
  catalogMaxOutput, choicesOf, clientOutputLimit, DEFAULT_MAX_OUTPUT_TOKENS, fitWireLimit, withOutputLimit, worstOutputTokens,
} from "../../src/money/output-limits.ts";

describe("output limits", () => {
  test("CONTRACT §7: the catalog gives a model's maximum output (worst case without max_tokens)", () => {
    expect(catalogMaxOutput("gpt-4o-mini")).toBe(16384);
    expect(catalogMaxOutput("openai/gpt-4o-mini")).toBe(16384);
    expect(catalogMaxOutput("no-such-model-xyz")).toBeNull();
  });
  test("CONTRACT §7: a lowered output limit keeps the client's field, lowers it, or sets the shape's own", () => {
    expect(withOutputLimit({ max_tokens: 5000 }, "chat", 300)).toEqual({ max_tokens: 300 });
    expect(withOutputLimit({ max_completion_tokens: 100 }, "chat", 300)).toEqual({ max_completion_tokens: 100 });
    expect(withOutputLimit({}, "chat", 300)).toEqual({ max_completion_tokens: 300 });
    expect(withOutputLimit({ input: "x" }, "responses", 300)).toEqual({ input: "x", max_output_tokens: 300 });
  });
  test("CONTRACT §7: the worst case is the client's limit, else the catalog's maximum output, else the documented default", () => {
    expect(worstOutputTokens(100, "gpt-4o-mini")).toBe(100);
    expect(worstOutputTokens(null, "gpt-4o-mini")).toBe(catalogMaxOutput("gpt-4o-mini")!);
    expect(worstOutputTokens(null, "no-such-model-xyz")).toBe(DEFAULT_MAX_OUTPUT_TOKENS);
  });
  test("CONTRACT §7: the client's limit is the largest of its limit fields (a decoy cannot shrink the reservation), rounded up; absent, zero or negative is none", () => {
    expect(clientOutputLimit({ max_tokens: 10, max_completion_tokens: 5000 })).toBe(5000);
    expect(clientOutputLimit({ max_output_tokens: 99.2 })).toBe(100);
    expect(clientOutputLimit({ max_tokens: 0 })).toBeNull();
    expect(clientOutputLimit({ max_tokens: -5, messages: [] })).toBeNull();
    expect(clientOutputLimit({ max_tokens: "500" })).toBeNull();
  });
  test("CONTRACT §7: n choices are each billed (n rounded up), one when absent or not above 1", () => {
    expect(choicesOf({ n: 4 })).toBe(4);
    expect(choicesOf({ n: 2.5 })).toBe(3);
    expect(choicesOf({})).toBe(1);
    expect(choicesOf({ n: 0 })).toBe(1);
  });
});

describe("the output limit a lane receives", () => {
  test("CONTRACT §7: a wire limit above what was admitted is lowered, a missing one set, per protocol and per choice", () => {
    const chat: Record<string, unknown> = { max_tokens: 5000, n: 2 };
    fitWireLimit(chat, "chat", 100, 2);
    expect(chat.max_tokens).toBe(100);
    const anthropic: Record<string, unknown> = { max_tokens: 64000 };
    fitWireLimit(anthropic, "anthropic", 1, 1);
    expect(anthropic.max_tokens).toBe(1);
    const gemini: Record<string, any> = { generationConfig: { candidateCount: 4 } };
    fitWireLimit(gemini, "gemini", 50, 4);
    expect(gemini.generationConfig.maxOutputTokens).toBe(50);
    const responses: Record<string, unknown> = {};
    fitWireLimit(responses, "responses", 300, 1);
    expect(responses.max_output_tokens).toBe(300);
    const under: Record<string, unknown> = { max_completion_tokens: 10 };
    fitWireLimit(under, "chat", 300, 1);
    expect(under.max_completion_tokens).toBe(10);
  });
  test("CONTRACT §7: lowering near the end of the budget divides what remains by the number of choices", () => {
    const est = { usd: 1, minUsd: 0.01, inTokens: 1000, outTokens: 1000, choices: 4, prices: [{ input: 1e-6, output: 1e-5 }] };
    // $0.041 granted: $0.001 of prompt, $0.04 for 4 choices → 1000 tokens each would be $0.04 in all.
    expect(outputLimitFor(est, 0.021)).toBe(500);
    expect(outputLimitFor({ ...est, choices: 1 }, 0.021)).toBe(1000);
  });
  test("CONTRACT §7: a Gemini lane's candidates share what was admitted (each gets its part, at least 1), and a smaller maxOutputTokens is kept", () => {
    const gemini: Record<string, any> = { generationConfig: { candidateCount: 3, maxOutputTokens: 10_000 } };
    fitWireLimit(gemini, "gemini", 100, 1);
    expect(gemini.generationConfig.maxOutputTokens).toBe(33);
    const tiny: Record<string, any> = { generationConfig: { candidateCount: 8 } };
    fitWireLimit(tiny, "gemini", 1, 1);
    expect(tiny.generationConfig.maxOutputTokens).toBe(1);
    const kept: Record<string, any> = { generationConfig: { maxOutputTokens: 5 } };
    fitWireLimit(kept, "gemini", 100, 1);
    expect(kept.generationConfig.maxOutputTokens).toBe(5);
  });
  test("CONTRACT §7: every limit field the lane reads is lowered, not only the first (a decoy max_tokens beside max_completion_tokens)", () => {
    const both: Record<string, unknown> = { max_completion_tokens: 5000, max_tokens: 7000 };
    fitWireLimit(both, "chat", 200, 1);
    expect(both).toEqual({ max_completion_tokens: 200, max_tokens: 200 });
    const bogus: Record<string, unknown> = { max_tokens: "lots" };
    fitWireLimit(bogus, "chat", 200, 1);
    expect(bogus.max_tokens).toBe(200);
  });
});
