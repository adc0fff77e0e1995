// CONTRACT §9, cost in the answer: the gateway's cost goes into a pass-through stream's usage event
// in place, every other byte as the upstream sent it.
import { describe, expect, test } from "bun:test";
import { costNumber, spliceCost } from "../../src/relay/stream/usage-cost.ts";

const enc = new TextEncoder();
const dec = new TextDecoder();
function splice(raw: string, pick: (ev: any) => any, usd = 0.00123): string | null {
  const data = raw.slice(raw.indexOf("data:") + 5).trim();
  const ev = JSON.parse(data);
  const out = spliceCost(enc.encode(raw), ev, pick(ev), usd);
  return out ? dec.decode(out) : null;
}

describe("CONTRACT §9: cost in a pass-through usage event, in place", () => {
  test("a Responses response.completed keeps its escapes, non-ASCII text and a tool parameter named usage; only the cost is added", () => {
    const raw = `event: response.completed\ndata: {"type":"response.completed","response":{"id":"resp_1","tools":[{"type":"function","name":"f","parameters":{"properties":{"usage":{"type":"string"}}}}],"output":[{"content":[{"text":"caf\u00e9 \\u00e9 \\"usage\\":{} \u{1F600}"}]}],"usage":{"input_tokens":3,"output_tokens":5},"user":null}}\n\n`;
    const out = splice(raw, (ev) => ev.response.usage)!;
    expect(out).toBe(raw.replace(`"output_tokens":5}`, `"output_tokens":5,"cost":0.00123}`));
  });

  test("a chat usage chunk with CRLF line ends and spaces inside the usage object", () => {
    const raw = `data: {"id":"c","choices":[],"usage": { "prompt_tokens": 1, "completion_tokens": 2 } }\r\n\r\n`;
    expect(splice(raw, (ev) => ev.usage)).toBe(raw.replace(`"completion_tokens": 2 }`, `"completion_tokens": 2 ,"cost":0.00123}`));
  });

  test("an empty usage object gets the cost without a comma", () => {
    const raw = `event: message_delta\ndata: {"type":"message_delta","usage":{}}\n\n`;
    expect(splice(raw, (ev) => ev.usage)).toBe(raw.replace(`"usage":{}`, `"usage":{"cost":0.00123}`));
  });

  test("a usage naming its own cost, or an event of several data lines, is not spliced (re-serialised instead)", () => {
    expect(splice(`data: {"usage":{"prompt_tokens":1,"cost":9}}\n\n`, (ev) => ev.usage)).toBeNull();
    expect(splice(`data: {"usage":{"prompt_tokens":1,"cost_details":{}}}\n\n`, (ev) => ev.usage)).toBeNull();
    const two = `data: {"usage":\ndata: {"prompt_tokens":1}}\n\n`;
    expect(spliceCost(enc.encode(two), { usage: { prompt_tokens: 1 } }, {}, 1)).toBeNull();
  });

  test("the cost is the records' own number (not rounded: equal to them); nothing costs 0", () => {
    expect(costNumber(0.0022800000000000003)).toBe(0.0022800000000000003);
    expect(costNumber(-1)).toBe(0);
    expect(costNumber(Number.NaN)).toBe(0);
  });
});
