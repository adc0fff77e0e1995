// Scans over upstream and client text in the cache and the relay are linear in the text's length
// (docs/caching.md "What a hit costs"): a cached answer is an upstream's text, so a pathological
// one (one long word, a long run of spaces, thousands of id-like words) must not block the
// instance. The id scan of replay templates is held to the regex it replaced on random text, and
// each scan to a time per byte on pathological text; then a 1 MiB one-word answer is replayed
// through a gateway while a timer probes how long the event loop stalls.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import fc from "fast-check";
import { compileTemplate, idTokens } from "../../src/cache/replay-template.ts";
import { matchCategory } from "../../src/relay/routing/classifier.ts";
import { startRelayWorld, type RelayWorld } from "../helpers/relay-world.ts";
import { addRoutingKey, chatBody, lane } from "./fixtures.ts";

/** The regex the id scan replaced: the reference for what it must find. */
const ID = /[A-Za-z]+[_-][A-Za-z0-9]{20,}/g;

/** Milliseconds `fn` takes, the best of three (a shared machine's noise only ever adds). */
function ms(fn: () => void): number {
  let best = Infinity;
  for (let i = 0; i < 3; i++) {
    const t = performance.now();
    fn();
    best = Math.min(best, performance.now() - t);
  }
  return best;
}

/** Pathological texts of about `n` characters: runs the old regexes backtracked over. */
const pathological = (n: number) => fc.constantFrom(
  "a".repeat(n),
  `x${" ".repeat(n)}y`,
  `x${"*".repeat(n)}y`,
  "ab_".repeat(n / 3),
  "a-".repeat(n / 2),
  `${"abc_defghijklmnopqrstuvwxyz0123 ".repeat(n / 32)}`,
  `${"q".repeat(n / 2)}_${"1".repeat(19)}`,
);

/** Random text over the characters that matter to the id scan. */
const idText = fc.array(fc.constantFrom("a", "Z", "0", "9", "_", "-", " ", '"', "é", "aaaa", "call_", "x".repeat(20)), { maxLength: 60 }).map((p) => p.join(""));

describe("CONTRACT §8: the cache's scans are linear in the answer's length", () => {
  test("CONTRACT §8: the id scan finds exactly what /[A-Za-z]+[_-][A-Za-z0-9]{20,}/g finds", () => {
    fc.assert(fc.property(idText, (s) => {
      const want = [...s.matchAll(ID)].map((m) => [m.index!, m.index! + m[0].length]);
      const got = [...idTokens(s)].map((t) => [t.start, t.end]);
      expect(got).toEqual(want);
      for (const t of idTokens(s)) expect(/^[A-Za-z]+[_-]$/.test(s.slice(t.start, t.prefixEnd))).toBe(true);
    }), { numRuns: 2000 });
  });

  test("CONTRACT §8: a replay template and the classifier's answer scan cost well under 1 µs per byte on pathological text", () => {
    const n = 256 * 1024;
    fc.assert(fc.property(pathological(n), (text) => {
      // Two encodings of one answer: the text is the same in both, an id differs.
      const a = `{"id":"chatcmpl-${"A".repeat(29)}","content":${JSON.stringify(text)}}`;
      const b = `{"id":"chatcmpl-${"B".repeat(29)}","content":${JSON.stringify(text)}}`;
      const tTemplate = ms(() => compileTemplate(a, b));
      const tClassifier = ms(() => matchCategory(text, ["code", "chat"]));
      // 1 µs per byte is 256 ms here; the quadratic regexes took seconds on a quarter of this.
      expect(tTemplate / a.length).toBeLessThan(1e-3);
      expect(tClassifier / text.length).toBeLessThan(1e-3);
    }), { numRuns: 7 });
    // And the template of that text still finds the one generated id only.
    const text = "ab_".repeat(n / 3);
    const t = compileTemplate(`{"id":"chatcmpl-${"A".repeat(29)}","c":"${text}"}`, `{"id":"chatcmpl-${"B".repeat(29)}","c":"${text}"}`);
    expect(t.slots.length).toBe(1);
  });
});

describe("CONTRACT §8: a 1 MiB one-word cached answer replays in a few ms of the main thread", () => {
  let w: RelayWorld<"openai">;
  beforeAll(async () => {
    // Entries of up to 4 MiB: the answer is 1 MiB of text before its JSON envelope.
    w = await startRelayWorld({ providers: ["openai"], env: { RESPONSE_CACHE_MAX_ENTRY_KB: "4096" } });
  }, 60_000);
  afterAll(() => w?.stop(), 60_000);

  /** The longest gap between ticks of a 1 ms timer while `fn` runs: how long the event loop was blocked. */
  async function stall<T>(fn: () => Promise<T>): Promise<{ value: T; maxGapMs: number }> {
    let last = performance.now();
    let maxGapMs = 0;
    const probe = setInterval(() => {
      const now = performance.now();
      maxGapMs = Math.max(maxGapMs, now - last);
      last = now;
    }, 1);
    try {
      await Bun.sleep(5);
      last = performance.now();
      const value = await fn();
      await Bun.sleep(5);
      return { value, maxGapMs };
    } finally {
      clearInterval(probe);
    }
  }

  test("CONTRACT §8: replaying a 1 MiB one-word answer stalls the event loop a few ms, never seconds (JSON and SSE)", async () => {
    const { gw, acct, up: { openai: A }, cred: { openai: cred } } = w;
    const word = "a".repeat(1 << 20);
    A.setDefault({ content: word, chunks: 1 });
    try {
      const k = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", cred.id)], cache: { ttl_seconds: 300, shared: false } });
      const body = chatBody({ messages: [{ role: "user", content: `one long word ${Math.random()}` }] });
      const post = (b: unknown) => gw.req("/v1/chat/completions", { method: "POST", token: k.raw, body: b });
      const miss = await post(body);
      expect(miss.headers.get("x-cache")).toBe("MISS");
      expect(((await miss.json()) as any).choices[0].message.content.length).toBe(word.length);
      for (const b of [body, { ...body, stream: true }]) {
        // The first hit of a protocol and mode compiles its template (the scan that was quadratic), later ones copy it.
        for (let i = 0; i < 2; i++) {
          const { value: res, maxGapMs } = await stall(() => post(b));
          expect(res.headers.get("x-cache")).toBe("HIT");
          const text = await res.text();
          expect(text.length).toBeGreaterThan(word.length);
          expect(text).toContain(word);
          // A few ms on a quiet machine (docs/caching.md); the bound is wide so a loaded CI machine
          // does not fail it, and still catches the quadratic scan (seconds for 1 MiB).
          expect(maxGapMs).toBeLessThanOrEqual(250);
        }
      }
    } finally {
      A.setDefault({});
    }
  }, 60_000);
});
