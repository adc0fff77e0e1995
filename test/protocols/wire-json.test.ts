// A pass-through lane's body keeps the client's own text for every top-level value the gateway left
// as it was, and writes fresh what it set, replaced or removed (src/protocols/wire-json.ts).
import { describe, expect, test } from "bun:test";
import { builtFrom, mapsMembers, rememberSource, wireJson } from "../../src/protocols/wire-json.ts";
import { chatUpstreamCodec } from "../../src/protocols/chat/index.ts";
import { NESTS_TOO_DEEP, scanJson } from "../../src/lib/json-scan.ts";

/** The body reader's member positions of a text (what it hands rememberSource), without a nesting limit. */
const topLevelMembers = (t: string) => {
  const members = scanJson(t, Infinity, true);
  return members === NESTS_TOO_DEEP ? null : members;
};
/** Each top-level key's [valueStart, valueEnd, keyStart], when the text maps one to one onto what JSON.parse gives; else null. */
const topLevelSpans = (t: string): Map<string, [number, number, number]> | null => {
  const members = topLevelMembers(t);
  const parsed = JSON.parse(t);
  if (!mapsMembers(parsed, t, members)) return null;
  return new Map(Object.keys(parsed).map((k, i) => [k, [members![i * 3 + 1]!, members![i * 3 + 2]!, members![i * 3]!]]));
};
import fc from "fast-check";

// Text JSON.stringify would write differently: an escaped é, a 1.0, spacing, a nested "model".
const history = Array.from({ length: 30 }, (_, i) => `{"role": "user", "content": "caf\\u00e9 step ${i}: {\\"model\\": \\"x\\"} \\\\ done", "n": 1.0}`).join(", ");
const text = `{ "model" : "gpt-4o-mini", "messages": [${history}], "max_tokens": 1024, "temperature": 0.20, "stream": false, "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}] }`;

function clientBody(t = text) {
  const body = JSON.parse(t);
  rememberSource(body, t, topLevelMembers(t));
  return body;
}

describe("pass-through body: the client's bytes for what the gateway did not change", () => {
  test("every top-level value is found where the text has it", () => {
    const spans = topLevelSpans(text)!;
    expect([...spans.keys()]).toEqual(["model", "messages", "max_tokens", "temperature", "stream", "tools"]);
    for (const [k, [s, e]] of spans) expect(JSON.parse(text.slice(s, e))).toEqual(JSON.parse(text)[k]);
  });

  test("unchanged values go out as the client wrote them; the model the lane set is written fresh", () => {
    const body = clientBody();
    const wire = chatUpstreamCodec.passThroughRequest!(body, { model: "gpt-4.1", stream: false });
    builtFrom(wire, body);
    const out = wireJson(wire);
    expect(JSON.parse(out)).toEqual(JSON.parse(JSON.stringify(wire)));
    expect(out).toContain('"model":"gpt-4.1"');
    expect(out).toContain("caf\\u00e9"); // the client's escape, not a re-serialized é
    expect(out).toContain('"temperature": 0.20'); // the member as the client spaced it
  });

  test("a value replaced, added or removed after parsing is written fresh, never the stale text", () => {
    const body = clientBody();
    const wire = chatUpstreamCodec.passThroughRequest!(body, { model: "gpt-4o-mini", stream: true });
    builtFrom(wire, body);
    wire.max_tokens = 10;
    delete wire.temperature;
    // The client body itself changed at the top level after parsing: its text no longer holds for it.
    body.tools = [];
    wire.tools = body.tools;
    const out = wireJson(wire);
    expect(JSON.parse(out)).toEqual(JSON.parse(JSON.stringify(wire)));
    expect(out).not.toContain("temperature");
    expect(out).toContain('"tools":[]');
    expect(out).toContain('"stream_options":{"include_usage":true}');
  });

  test("text it cannot map (an escaped key) and bodies not built from a client body are serialized as before", () => {
    const odd = text.replace('"max_tokens"', '"max\\u005ftokens"');
    expect(topLevelSpans(odd)).toBeNull();
    const body = clientBody(odd);
    const wire = { ...body, model: "m" };
    builtFrom(wire, body);
    expect(wireJson(wire)).toBe(JSON.stringify(wire));
    const plain = { model: "m", messages: [] };
    expect(wireJson(plain)).toBe(JSON.stringify(plain));
  });

  test("keys JavaScript orders apart from the text (integer-like) and more than 64 top-level keys: nothing is mapped", () => {
    const numeric = text.replace('"stream": false', '"stream": false, "7": 1');
    expect(topLevelSpans(numeric)).toBeNull();
    const many = text.replace('"stream": false', Array.from({ length: 70 }, (_, i) => `"k${i}": ${i}`).join(", ") + ', "stream": false');
    expect(topLevelSpans(many)).toBeNull();
    for (const t of [numeric, many]) {
      const body = clientBody(t);
      const wire = { ...body, model: "m" };
      builtFrom(wire, body);
      expect(wireJson(wire)).toBe(JSON.stringify(wire));
    }
  });

  test("a duplicated key: nothing is reused, the body goes out serialized with the value JSON.parse kept", () => {
    const dup = text.replace('"stream": false', '"stream": false, "stream": true');
    expect(topLevelSpans(dup)).toBeNull();
    const body = clientBody(dup);
    const wire = { ...body, model: "m" };
    builtFrom(wire, body);
    const out = wireJson(wire);
    expect(out).toBe(JSON.stringify(wire));
    expect(JSON.parse(out).stream).toBe(true);
  });

  test("nothing changed, added or removed: the client's text itself goes out (no new string)", () => {
    const body = clientBody();
    const wire = chatUpstreamCodec.passThroughRequest!(body, { model: "gpt-4o-mini", stream: false });
    builtFrom(wire, body);
    expect(wireJson(wire)).toBe(text);
    // One member changed, or one dropped: written member by member again.
    const lowered = { ...wire, max_tokens: 10 };
    builtFrom(lowered, body);
    expect(JSON.parse(wireJson(lowered)).max_tokens).toBe(10);
    const { temperature: _t, ...dropped } = wire;
    builtFrom(dropped, body);
    expect(wireJson(dropped)).not.toContain("temperature");
  });

  test("a stream whose client asked for usage keeps its stream_options, so its text goes out as it came", () => {
    const asked = text.replace('"stream": false', '"stream": true, "stream_options": {"include_usage": true}');
    const body = clientBody(asked);
    const wire = chatUpstreamCodec.passThroughRequest!(body, { model: "gpt-4o-mini", stream: true });
    builtFrom(wire, body);
    expect(wire.stream_options).toBe(body.stream_options);
    expect(wireJson(wire)).toBe(asked);
    // A client that did not ask still gets usage requested upstream (the relay reads it).
    const plain = clientBody(text.replace('"stream": false', '"stream": true'));
    const wire2 = chatUpstreamCodec.passThroughRequest!(plain, { model: "gpt-4o-mini", stream: true });
    builtFrom(wire2, plain);
    expect(JSON.parse(wireJson(wire2)).stream_options).toEqual({ include_usage: true });
  });
});

describe("the body reader's one walk (src/lib/json-scan.ts): nesting and top-level spans together", () => {
  test("for any JSON object, every span parses to the value JSON.parse gives that key", () => {
    fc.assert(fc.property(fc.dictionary(fc.string(), fc.jsonValue()), fc.constantFrom(0, 2), (obj, indent) => {
      let t = JSON.stringify(obj, null, indent);
      if (t.length < 1024) t = t.replace(/^\{/, `{${" ".repeat(1024)}`);
      const spans = topLevelSpans(t);
      // Not mapped: a key with an escape, or integer-like keys (JavaScript orders them first).
      if (spans === null) return Object.keys(obj).some((k) => JSON.stringify(k).includes("\\") || /^(0|[1-9]\d*)$/.test(k));
      const parsed = JSON.parse(t);
      expect([...spans.keys()].sort()).toEqual(Object.keys(parsed).sort());
      for (const [k, [s, e, ks]] of spans) {
        expect(JSON.parse(t.slice(s, e))).toEqual(parsed[k]);
        // From the key's opening quote: the member as the client wrote it.
        expect(JSON.parse(`{${t.slice(ks, e)}}`)).toEqual({ [k]: parsed[k] });
      }
      return true;
    }), { numRuns: 300 });
  });

  test("the nesting limit holds with or without spans (MAX_JSON_DEPTH, CONTRACT §6's 400)", () => {
    const deep = `{"a":${"[".repeat(65)}${"]".repeat(65)}}`;
    expect(scanJson(deep, 64, true)).toBe(NESTS_TOO_DEEP);
    expect(scanJson(deep, 64, false)).toBe(NESTS_TOO_DEEP);
    expect(scanJson(deep, 66, true)).not.toBe(NESTS_TOO_DEEP);
    expect(scanJson(`{"a":"${"[".repeat(100)}"}`, 64, true)).toEqual([1, 5, 107]);
  });
});
