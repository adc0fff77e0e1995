// Property (CONTRACT §7): over generated request shapes (client protocol, output-limit fields, `n`,
// lanes speaking another protocol or the same one), the worst case the gateway reserves is at
// least the most the upstream can bill for the body it actually receives after translation and
// the attempt's limit guard: every input token (at most one per byte) plus the wire output limit
// times the wire choice count, at the lane's prices.
import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { clientCodecs, upstreamCodecs } from "../../src/protocols/index.ts";
import type { ClientShape, Json, WireProtocol } from "../../src/protocols/types.ts";
import { estimateRequest } from "../../src/money/estimate.ts";
import { catalogMaxOutput, choicesOf, clientOutputLimit, DEFAULT_MAX_OUTPUT_TOKENS, fitWireLimit } from "../../src/money/output-limits.ts";
import { checkOutputAsk } from "../../src/money/request-checks.ts";
import { unitPrices } from "../../src/money/pricing.ts";

const ctx = { config: { UNKNOWN_MODEL_PRICE_USD_PER_MTOK_INPUT: 100, UNKNOWN_MODEL_PRICE_USD_PER_MTOK_OUTPUT: 400 } } as any;
const LANES: Array<{ provider: string; protocol: WireProtocol; model: string }> = [
  { provider: "openai", protocol: "chat", model: "gpt-4o" },
  { provider: "anthropic", protocol: "anthropic", model: "claude-haiku-4-5" },
  { provider: "google", protocol: "gemini", model: "gemini-2.5-flash" },
];

/** The body a lane receives: pass-through when it speaks the client's shape, else client → pivot → lane. */
function wireBody(shape: ClientShape, body: Json, protocol: WireProtocol, model: string): Json {
  const native = upstreamCodecs[protocol]!;
  let out: Json;
  if (protocol === shape && native.passThroughRequest) out = native.passThroughRequest(body, { model, stream: false });
  else out = native.encodeRequest(clientCodecs[shape]!.toPivot(body), { model, stream: false });
  out = { ...out };
  const cap = clientOutputLimit(body);
  if (cap !== null) fitWireLimit(out, protocol, cap, choicesOf(body));
  return out;
}

/** The most output the upstream can generate for a wire body: its limit (else the model's) times its choices. */
function wireOutput(wire: Json, protocol: WireProtocol, model: string): number {
  const max = catalogMaxOutput(model) ?? DEFAULT_MAX_OUTPUT_TOKENS;
  if (protocol === "gemini") {
    const gc = wire.generationConfig ?? {};
    return (gc.maxOutputTokens ?? max) * (gc.candidateCount ?? 1);
  }
  const limit = protocol === "anthropic" ? wire.max_tokens : wire.max_completion_tokens ?? wire.max_tokens ?? wire.max_output_tokens;
  return Math.min(limit ?? max, max) * (wire.n ?? 1);
}

const limitValue = fc.option(fc.integer({ min: 1, max: 200_000 }), { nil: undefined });

describe("reservations over request shapes (property)", () => {
  test("CONTRACT §7: reserved worst case ≥ the most the upstream can bill, for every shape, n, limit fields and lane", () => {
    fc.assert(
      fc.property(
        fc.constantFrom<ClientShape>("chat", "responses", "anthropic"),
        // Mostly agreeing limit fields (one value in a subset of the fields), sometimes a decoy.
        fc.tuple(limitValue, fc.subarray(["max_tokens", "max_completion_tokens", "max_output_tokens"]), fc.option(fc.constantFrom("max_tokens", "max_completion_tokens", "max_output_tokens"), { freq: 4, nil: undefined }), limitValue)
          .map(([v, fields, decoy, d]) => {
            const out: Record<string, number | undefined> = {};
            for (const f of fields) out[f] = v;
            if (decoy) out[decoy] = d;
            return out;
          }),
        fc.option(fc.integer({ min: 1, max: 128 }), { nil: undefined }),
        fc.string({ minLength: 1, maxLength: 200 }),
        fc.constantFrom(...LANES),
        (shape, limits, n, text, lane) => {
          const body: Json = shape === "responses" ? { model: lane.model, input: text } : { model: lane.model, messages: [{ role: "user", content: text }] };
          for (const [k, v] of Object.entries(limits)) if (v !== undefined) body[k] = v;
          if (shape === "anthropic" && body.max_tokens === undefined) body.max_tokens = 1024;
          if (n !== undefined && shape === "chat") body.n = n;
          try {
            checkOutputAsk(body, shape);
          } catch {
            return; // refused with 400 before any reservation: nothing can be billed
          }
          let wire: Json;
          try {
            wire = wireBody(shape, body, lane.protocol, lane.model);
          } catch {
            return; // this lane cannot express the request (unsupported_feature): nothing is sent
          }
          const bytes = Buffer.byteLength(JSON.stringify(body));
          const key = { lanes: [{ provider: lane.provider, model: null }], budgetExcludesSeats: true } as any;
          const est = estimateRequest(ctx, key, body, bytes)!;
          const p = unitPrices(lane.provider, lane.model)!;
          const most = bytes * p.input + wireOutput(wire, lane.protocol, lane.model) * p.output;
          expect(est.usd).toBeGreaterThanOrEqual(most * (1 - 1e-9));
        },
      ),
      { numRuns: 400 },
    );
  });
});
