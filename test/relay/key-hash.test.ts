// The routing key's hash is cached by raw value; the cache must never change what a key hashes to.
import { expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { routingKeyHash } from "../../src/relay/auth.ts";

const sha = (s: string) => createHash("sha256").update(s).digest("hex");

test("SPEC Authentication 5: a routing key hashes to its SHA-256 every time, past the hash cache's bound too", () => {
  const ctx = { config: { siteUrl: "http://localhost" } } as any;
  const first = "gw_first_key_0000000000000000000000";
  expect(routingKeyHash(ctx, first)).toBe(sha(first));
  for (let i = 0; i < 10_050; i++) {
    const k = `gw_${i.toString(36).padStart(24, "0")}`;
    expect(routingKeyHash(ctx, k)).toBe(sha(k));
  }
  expect(routingKeyHash(ctx, first)).toBe(sha(first));
  expect(() => routingKeyHash(ctx, "sk-not-ours")).toThrow();
});
