// The key of a cached answer (docs/caching.md "What makes two requests the same"): every body
// field is in it except the documented deny-list, key order does not matter, the endpoint,
// the account and the namespace are part of it, and a version prefixes it. And the Redis store
// of entries treats an unreachable Redis as a miss, never an error.
import { describe, expect, test } from "bun:test";
import Redis from "ioredis";
import { canonicalJson, CACHE_KEY_VERSION, entryKey, IGNORED_FIELDS, requestHash, routeDigest } from "../../src/cache/key.ts";
import { cacheControlOf } from "../../src/cache/control.ts";
import { RedisCacheStore } from "../../src/cache/store.ts";

const base = {
  model: "gpt-4o-mini",
  messages: [{ role: "user", content: "What is 2+2?" }],
  temperature: 0.2,
};

describe("response cache key", () => {
  test("the deny-list is short and documented: stream, stream_options, user, metadata, store, safety_identifier, prompt_cache_key", () => {
    expect([...IGNORED_FIELDS].sort()).toEqual(["metadata", "prompt_cache_key", "safety_identifier", "store", "stream", "stream_options", "user"]);
  });

  test("every deny-listed field leaves the key unchanged", () => {
    const values: Record<string, unknown> = {
      stream: true, stream_options: { include_usage: true }, user: "agent-7", metadata: { run: "42" },
      store: true, safety_identifier: "u-1", prompt_cache_key: "pck",
    };
    for (const f of IGNORED_FIELDS) expect(requestHash("chat", { ...base, [f]: values[f] })).toBe(requestHash("chat", base));
  });

  test("every other field is in the key (the output-changing ones peers forgot included)", () => {
    const changes: Record<string, unknown> = {
      model: "gpt-4o",
      messages: [{ role: "user", content: "What is 2+3?" }],
      temperature: 0.3,
      top_p: 0.9,
      seed: 7,
      max_tokens: 10,
      max_completion_tokens: 10,
      max_output_tokens: 10,
      stop: ["\n"],
      tools: [{ type: "function", function: { name: "add", parameters: { type: "object" } } }],
      tool_choice: "required",
      parallel_tool_calls: false,
      reasoning_effort: "high",
      reasoning: { effort: "low" },
      response_format: { type: "json_object" },
      text: { format: { type: "json_object" } },
      logprobs: true,
      top_logprobs: 2,
      presence_penalty: 0.5,
      frequency_penalty: 0.5,
      logit_bias: { "50256": -100 },
      n: 1,
      modalities: ["text"],
      verbosity: "low",
      service_tier: "priority",
      instructions: "Be brief.",
      system: "Be brief.",
      thinking: { type: "enabled", budget_tokens: 1024 },
      a_field_added_tomorrow: 1,
    };
    const seen = new Set([requestHash("chat", base)]);
    for (const [f, v] of Object.entries(changes)) {
      const h = requestHash("chat", { ...base, [f]: v });
      expect(seen.has(h)).toBe(false);
      seen.add(h);
    }
  });

  test("key order does not matter at any depth; array order does", () => {
    const a = { model: "m", messages: [{ role: "user", content: "x" }], tools: [{ type: "function", function: { name: "f", parameters: { b: 1, a: 2 } } }] };
    const b = { tools: [{ function: { parameters: { a: 2, b: 1 }, name: "f" }, type: "function" }], messages: [{ content: "x", role: "user" }], model: "m" };
    expect(canonicalJson(a)).toBe(canonicalJson(b));
    expect(requestHash("chat", a)).toBe(requestHash("chat", b));
    const two = { model: "m", messages: [{ role: "user", content: "x" }, { role: "user", content: "y" }] };
    const swapped = { model: "m", messages: [{ role: "user", content: "y" }, { role: "user", content: "x" }] };
    expect(requestHash("chat", two)).not.toBe(requestHash("chat", swapped));
  });

  test("the endpoint, the account and the namespace are in the store key, with the version", () => {
    expect(requestHash("chat", base)).not.toBe(requestHash("responses", base));
    const own = entryKey({ accountId: "acct_a", keyId: "rkey_1", shared: false, route: "r" }, "chat", base);
    expect(own).toStartWith(`gw:rc:v${CACHE_KEY_VERSION}:{rc:acct_a}:key:rkey_1:`);
    expect(entryKey({ accountId: "acct_a", keyId: "rkey_2", shared: false, route: "r" }, "chat", base)).not.toBe(own);
    const shared = entryKey({ accountId: "acct_a", keyId: "rkey_1", shared: true, route: "r" }, "chat", base);
    expect(entryKey({ accountId: "acct_a", keyId: "rkey_2", shared: true, route: "r" }, "chat", base)).toBe(shared);
    expect(entryKey({ accountId: "acct_b", keyId: "rkey_1", shared: true, route: "r" }, "chat", base)).not.toBe(shared);
  });

  test("CONTRACT §8: the route digest changes with every lane setting, what a lane names and whether it still exists", () => {
    const laneOf = (extra: Record<string, unknown> = {}) => ({
      provider: "openai", model: null, credential_id: "cred_1", sub_session_id: null, bridge_instance_id: null, category_key: null, category_description: null,
      fallback_to_default_model: true, reasoning_effort: null, verbosity: null, service_tier: null, index: 0,
      credential: { id: "cred_1", apiKeyCiphertext: "ct" }, bridge: null, subSession: null, ...extra,
    });
    const route = (lane: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
      ({ mode: "fallback", classifierProvider: null, classifierModel: null, classifierInstructions: null, classifierCredentialId: null, lanes: [lane], ...extra }) as unknown as Parameters<typeof routeDigest>[0];
    const base = routeDigest(route(laneOf()));
    expect(routeDigest(route(laneOf()))).toBe(base);
    // A secret's ciphertext is not part of it (the same key re-read is the same route).
    expect(routeDigest(route(laneOf({ credential: { id: "cred_1", apiKeyCiphertext: "other" } })))).toBe(base);
    const changes = [
      laneOf({ reasoning_effort: "high" }), laneOf({ model: "gpt-4o" }), laneOf({ provider: "groq" }), laneOf({ service_tier: "flex" }),
      laneOf({ verbosity: "low" }), laneOf({ fallback_to_default_model: false }), laneOf({ credential_id: "cred_2", credential: { id: "cred_2", apiKeyCiphertext: "ct" } }),
      laneOf({ credential: null }), laneOf({ a_setting_added_tomorrow: 1 }),
    ];
    const seen = new Set([base]);
    for (const l of changes) {
      const d = routeDigest(route(l));
      expect(seen.has(d)).toBe(false);
      seen.add(d);
    }
    expect(seen.has(routeDigest(route(laneOf(), { mode: "classifier", classifierModel: "m" })))).toBe(false);
    const ctx = { accountId: "acct_a", keyId: "rkey_1", shared: true };
    expect(entryKey({ ...ctx, route: base }, "chat", { model: "m" })).not.toBe(entryKey({ ...ctx, route: [...seen][1]! }, "chat", { model: "m" }));
  });

  test("Cache-Control: no-store, no-cache, max-age=N; malformed directives are ignored", () => {
    expect(cacheControlOf(null)).toEqual({ noStore: false, noCache: false, maxAge: null });
    expect(cacheControlOf("No-Store")).toEqual({ noStore: true, noCache: false, maxAge: null });
    expect(cacheControlOf("no-cache, max-age=30")).toEqual({ noStore: false, noCache: true, maxAge: 30 });
    expect(cacheControlOf("max-age=abc, max-age=-1, private")).toEqual({ noStore: false, noCache: false, maxAge: null });
    expect(cacheControlOf('max-age="60"').maxAge).toBe(60);
  });

  test("an unreachable Redis is a miss: reads give nothing, writes keep nothing, the lock says unreachable, nothing throws", async () => {
    // A port nothing listens on; commands fail fast as the gateway's own client does.
    const r = new Redis("redis://127.0.0.1:1", { enableOfflineQueue: false, maxRetriesPerRequest: 0, lazyConnect: true, retryStrategy: () => null });
    r.on("error", () => {});
    const store = new RedisCacheStore(r, { perAccount: 1 << 20, total: 1 << 24 }, 75);
    expect(await store.get("gw:rc:x")).toBeNull();
    expect(await store.set("gw:rc:x", "{}", 60, "acct_a")).toBe(false);
    expect(await store.lock("gw:rc:x", "me", 1000)).toBeNull();
    await store.unlock("gw:rc:x", "me");
    r.disconnect();
  });
});
