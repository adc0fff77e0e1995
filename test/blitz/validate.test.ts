// Shape rules of a /blitz body, checked on the parser alone (the HTTP tests check the 400s end to end).
import { describe, expect, test } from "bun:test";
import { GatewayError } from "../../src/errors.ts";
import { parseBlitzBody } from "../../src/blitz/validate.ts";

function refusal(body: Record<string, unknown>): GatewayError {
  try {
    parseBlitzBody(body);
  } catch (e) {
    if (e instanceof GatewayError) return e;
    throw e;
  }
  throw new Error("expected a refusal");
}

describe("blitz body validation", () => {
  test("a string prompt becomes one user message; shared parameters reach every prompt", () => {
    const b = parseBlitzBody({ model: "m", temperature: 0.2, max_tokens: 9, tools: [{ type: "function", function: { name: "f" } }], prompts: ["a", { messages: [{ role: "system", content: "s" }, { role: "user", content: "b" }] }] });
    expect(b.requests).toHaveLength(2);
    expect(b.requests[0]).toEqual({ model: "m", temperature: 0.2, max_tokens: 9, tools: [{ type: "function", function: { name: "f" } }], messages: [{ role: "user", content: "a" }], stream: false });
    expect(b.requests[1]!.messages).toHaveLength(2);
    expect(b.requests[1]!.temperature).toBe(0.2);
    expect("prompts" in b.requests[1]!).toBe(false);
  });

  test("a prompt object's own parameters override the shared ones for that prompt only", () => {
    const b = parseBlitzBody({ model: "m", max_tokens: 9, prompts: [{ messages: [{ role: "user", content: "x" }], max_tokens: 3 }, "y"] });
    expect(b.requests[0]!.max_tokens).toBe(3);
    expect(b.requests[1]!.max_tokens).toBe(9);
  });

  test("1 to 50 prompts: none and 51 are refused with bad_request", () => {
    expect(refusal({ model: "m", prompts: [] }).message).toContain("prompts is empty");
    const e = refusal({ model: "m", prompts: Array.from({ length: 51 }, () => "x") });
    expect(e.status).toBe(400);
    expect(e.code).toBe("bad_request");
    expect(e.message).toContain("at most 50");
    expect(parseBlitzBody({ model: "m", prompts: Array.from({ length: 50 }, () => "x") }).requests).toHaveLength(50);
  });

  test("model is a required string", () => {
    expect(refusal({ prompts: ["x"] }).message).toStartWith("model is required");
    expect(refusal({ model: 3, prompts: ["x"] }).message).toStartWith("model must be a non-empty string");
  });

  test("each prompt is a string or {messages: non-empty array of message objects}, and the message names the field", () => {
    expect(refusal({ model: "m", prompts: ["a", "b", "c", { messages: [] }] }).message).toStartWith("prompts[3].messages must be a non-empty array");
    expect(refusal({ model: "m", prompts: [{}] }).message).toStartWith("prompts[0].messages must be a non-empty array");
    expect(refusal({ model: "m", prompts: ["a", 7] }).message).toStartWith("prompts[1] must be a string or an object");
    expect(refusal({ model: "m", prompts: [{ messages: ["hi"] }] }).message).toStartWith("prompts[0].messages[0] must be a message object");
    expect(refusal({ model: "m", prompts: [{ messages: [{ content: "hi" }] }] }).message).toStartWith("prompts[0].messages[0].role");
    expect(refusal({ model: "m", prompts: [" "] }).message).toStartWith("prompts[0] is an empty string");
    expect(refusal({ model: "m", prompts: "x" }).message).toStartWith("prompts must be an array");
  });

  test("CONTRACT §8: top-level stream: true asks for events; a prompt's own stream is refused with the reason", () => {
    const b = parseBlitzBody({ model: "m", stream: true, prompts: ["x"] });
    expect(b.stream).toBe(true);
    expect(b.requests[0]!.stream).toBe(false);
    expect(parseBlitzBody({ model: "m", prompts: ["x"] }).stream).toBe(false);
    const e = refusal({ model: "m", stream: "yes", prompts: ["x"] });
    expect(e.code).toBe("bad_request");
    expect(e.message).toContain("stream must be a boolean");
    expect(refusal({ model: "m", stream: true, stream_options: {}, prompts: ["x"] }).message).toStartWith("stream_options");
    expect(refusal({ model: "m", prompts: [{ messages: [{ role: "user", content: "x" }], stream: true }] }).message).toStartWith("prompts[0].stream");
    expect(parseBlitzBody({ model: "m", stream: false, prompts: ["x"] }).requests[0]!.stream).toBe(false);
  });

  test("shared chat parameters of the wrong type are refused naming the field", () => {
    expect(refusal({ model: "m", temperature: "hot", prompts: ["x"] }).message).toStartWith("temperature must be a number");
    expect(refusal({ model: "m", max_tokens: 0, prompts: ["x"] }).message).toStartWith("max_tokens must be a positive integer");
    expect(refusal({ model: "m", tools: {}, prompts: ["x"] }).message).toStartWith("tools must be an array of objects");
    expect(refusal({ model: "m", prompts: [{ messages: [{ role: "user", content: "x" }], top_p: 3 }] }).message).toStartWith("prompts[0].top_p must be between 0 and 1");
  });

  test("top-level messages and per-prompt model are refused rather than guessed at", () => {
    expect(refusal({ model: "m", messages: [], prompts: ["x"] }).message).toStartWith("messages is not a /blitz field");
    expect(refusal({ model: "m", prompts: [{ messages: [{ role: "user", content: "x" }], model: "other" }] }).message).toStartWith("prompts[0].model");
  });
});
