// The delta count (CONTRACT §7: an abandoned or cut-off answer pays the output tokens it delivered)
// read off a pass-through stream's bytes: only keys of generated text, each counted once, and
// nothing that merely looks like one inside the text.
import { describe, expect, test } from "bun:test";
import { countDeltaTokens, tokensOfDelta } from "../../src/relay/stream/delta-count.ts";

const count = (text: string, protocol: string) => {
  const buf = Buffer.from(text);
  return countDeltaTokens(buf, buf.length, protocol);
};

describe("delta count of a pass-through stream (CONTRACT §7)", () => {
  test("chat: content, reasoning_content, reasoning, arguments and refusal each count their text; other keys do not", () => {
    const ev = (delta: string) => `data: {"id":"c1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":${delta}}],"usage":null}\n\n`;
    const text = [
      ev(`{"role":"assistant","content":"abcdef"}`), // 6 bytes: 2 tokens
      ev(`{"reasoning_content":"abcdefghi"}`), // 9: 3 (counted once, not again as content)
      ev(`{"reasoning":"abc"}`), // 3: 1
      ev(`{"tool_calls":[{"index":0,"function":{"name":"read","arguments":"{\\"path\\":\\"a\\"}"}}]}`), // 16 escaped bytes: 6
      ev(`{"refusal":"no"}`), // 2: 1
    ].join("");
    expect(count(text, "chat")).toBe(2 + 3 + 1 + tokensOfDelta(16) + 1);
  });

  test("a key inside the text (escaped quotes), a key without its opening quote, and a key whose value is not a string count nothing", () => {
    const inner = `say \\"content\\":\\"x\\"`; // counted as sent, escapes and all
    const text =
      `data: {"choices":[{"delta":{"content":"${inner}"}}]}\n\n` +
      `data: {"choices":[{"delta":{"xcontent":"abcdef"}}]}\n\n` +
      `data: {"choices":[{"delta":{"content":null}}]}\n\n`;
    expect(count(text, "chat")).toBe(tokensOfDelta(inner.length));
    // At the very start of a region there is no opening quote to find.
    expect(count(`content":"abcdef"`, "chat")).toBe(0);
    expect(count(`"content":"abcdef"`, "chat")).toBe(2);
  });

  test("whitespace around the colon is JSON too; an empty delta counts nothing, a non-empty one at least a token", () => {
    expect(count(`data: {"delta": {"content" :  "abcdefghijkl"}}\n\n`, "chat")).toBe(4);
    expect(count(`data: {"delta":{"content":""}}\n\n`, "chat")).toBe(0);
    expect(count(`data: {"delta":{"content":"a"}}\n\n`, "chat")).toBe(1);
  });

  test("Responses, Anthropic and Gemini count their own keys", () => {
    expect(count(`event: response.output_text.delta\ndata: {"type":"response.output_text.delta","delta":"abcdef"}\n\nevent: response.output_text.done\ndata: {"type":"response.output_text.done","text":"abcdef"}\n\n`, "responses")).toBe(2);
    expect(count(`event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"abcdef"}}\n\nevent: content_block_delta\ndata: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\\"a\\":1}"}}\n\nevent: content_block_delta\ndata: {"type":"content_block_delta","index":2,"delta":{"type":"thinking_delta","thinking":"abc"}}\n\n`, "anthropic")).toBe(2 + tokensOfDelta(9) + 1);
    expect(count(`data: {"candidates":[{"content":{"parts":[{"text":"abcdefghi"}],"role":"model"}}]}\n\n`, "gemini")).toBe(3);
    expect(count(`data: {"content":"abcdef"}\n\n`, "unknown")).toBe(0);
  });
});
