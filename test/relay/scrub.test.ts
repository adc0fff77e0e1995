// Upstream text shown to clients never carries a secret (README "Secrets"): every vendor key
// format the providers list (providers/endpoints.ts), bearer tokens and long opaque strings are
// redacted from the upstream messages the relay passes on.
import { describe, expect, test } from "bun:test";
import { scrub } from "../../src/relay/relay-errors.ts";

describe("scrub", () => {
  const secrets = [
    "sk-proj-AbCdEf0123456789", // OpenAI
    "sk-ant-api03-AbCdEf0123456789", // Anthropic
    "gsk_AbCdEf0123456789", // Groq
    "csk-AbCdEf0123456789", // Cerebras
    "xai-AbCdEf0123456789", // xAI
    "AIzaSyAbCdEf0123456789", // Google
    "gw_AbCdEf0123456789", // the gateway's own routing key
  ];
  for (const s of secrets) {
    test(`a ${s.slice(0, 4)}… key in an upstream message is redacted`, () => {
      const out = scrub(`Incorrect API key provided: ${s}. You can find your API key at https://example.com.`);
      expect(out).not.toContain(s);
      expect(out).toContain("[redacted]");
      expect(out).toStartWith("Incorrect API key provided:");
    });
  }

  test("bearer tokens and long opaque strings are redacted; ordinary text and short ids stay", () => {
    const out = scrub("auth Bearer abc.def.ghi failed for token " + "x".repeat(48) + " on model gpt-4o (req_12)");
    expect(out).toBe("auth Bearer [redacted] failed for token [redacted] on model gpt-4o (req_12)");
  });

  test("a message is cut at 600 characters", () => {
    expect(scrub("word ".repeat(400)).length).toBe(600);
  });
});
