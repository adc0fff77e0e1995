// A hit's bytes are encoded once per entry, protocol and mode, and copied per hit with fresh ids
// and the current time written into their slots (src/cache/replay-template.ts). CONTRACT §8
// wants ids fresh per hit: these tests hold the copies to it.
import { describe, expect, test } from "bun:test";
import { randomToken } from "../../src/lib/crypto.ts";
import { compileTemplate, fillTemplate, ReplayTemplates } from "../../src/cache/replay-template.ts";

const dec = new TextDecoder();
/** An answer as an encoder writes it: its own ids drawn afresh each time, text that looks like an id kept. */
function encode(created = 1790000000) {
  const id = `chatcmpl-${randomToken(29)}`;
  const call = `call_${randomToken(24)}`;
  const chunk = (delta: string) => `data: {"id":"${id}","created":${created},"choices":[{"delta":${delta}}]}\n\n`;
  return chunk(`{"content":"héllo wörld — ticket_ABCDEFGHIJKLMNOPQRSTUV stays"}`) + chunk(`{"tool_calls":[{"id":"${call}"}]}`) + chunk(`{"tool_calls":[{"id":"${call}"}]}`) + "data: [DONE]\n\n";
}
const ids = (s: string) => [...s.matchAll(/"id":"([^"]+)"/g)].map((m) => m[1]!);

describe("replay templates", () => {
  test("CONTRACT §8: every copy has fresh ids, one id the same wherever it occurs, the answer's own id-like text untouched", () => {
    const t = compileTemplate(encode(), encode());
    const a = dec.decode(fillTemplate(t));
    const b = dec.decode(fillTemplate(t));
    for (const s of [a, b]) {
      const [c1, c2, c3] = ids(s).filter((x) => x.startsWith("chatcmpl-"));
      const [t1, t2] = ids(s).filter((x) => x.startsWith("call_"));
      expect(c1).toMatch(/^chatcmpl-[A-Za-z0-9]{29}$/);
      expect([c2, c3]).toEqual([c1, c1]);
      expect(t1).toMatch(/^call_[A-Za-z0-9]{24}$/);
      expect(t2).toBe(t1);
      expect(s).toContain("héllo wörld — ticket_ABCDEFGHIJKLMNOPQRSTUV stays");
      expect(s.endsWith("data: [DONE]\n\n")).toBe(true);
    }
    expect(ids(a)[0]).not.toBe(ids(b)[0]);
    expect(ids(a).find((x) => x.startsWith("call_"))).not.toBe(ids(b).find((x) => x.startsWith("call_")));
    // Only the ids differ: the rest is byte for byte the encoding.
    const mask = (s: string) => s.replace(/chatcmpl-[A-Za-z0-9]{29}|call_[A-Za-z0-9]{24}/g, "ID").replace(/"created":\d+/g, "T");
    expect(mask(a)).toBe(mask(encode()));
  });

  test("CONTRACT §8: a copy carries the time of the hit, not the time it was first encoded", () => {
    const t = compileTemplate(encode(1700000000), encode(1700000000));
    const now = Math.floor(Date.now() / 1000);
    const created = [...dec.decode(fillTemplate(t)).matchAll(/"created":(\d+)/g)].map((m) => Number(m[1]));
    expect(created.length).toBe(3);
    for (const c of created) expect(Math.abs(c - now)).toBeLessThanOrEqual(2);
  });

  test("the first hit encodes twice, later hits copy", () => {
    const templates = new ReplayTemplates(1 << 20);
    let encodes = 0;
    const enc = () => (encodes++, encode());
    const a = dec.decode(templates.bytes("k", enc));
    const b = dec.decode(templates.bytes("k", enc));
    expect(encodes).toBe(2);
    expect(ids(a)[0]).not.toBe(ids(b)[0]);
  });
});
