// CONTRACT §9 "Session affinity": which request field names the session, the default per key, and
// the lane order a remembered lane gives. Called directly, nothing booted.
import { expect, test } from "bun:test";
import { affinityFirst, affinityResult, sessionOf } from "../../src/relay/routing/affinity.ts";
import { affinityTtlSeconds } from "../../src/relay/routing/affinity-setting.ts";
import { laneIdentity } from "../../src/relay/routing/cooldowns.ts";
import type { ResolvedLane } from "../../src/providers/types.ts";

const h = (o: Record<string, string>) => new Headers(o);

test("CONTRACT §9: the session is the first present of x-session-id, x-claude-code-session-id, session-id, x-session-affinity, thread-id, then prompt_cache_key, metadata.user_id, user", () => {
  const body = { model: "m", prompt_cache_key: "pck", metadata: { user_id: "uid" }, user: "usr" };
  const all = { "x-session-id": "a", "x-claude-code-session-id": "b", "session-id": "c", "x-session-affinity": "d", "thread-id": "e" };
  expect(sessionOf(h(all), body)).toBe("a");
  const order = ["x-session-id", "x-claude-code-session-id", "session-id", "x-session-affinity", "thread-id"];
  for (let i = 0; i < order.length; i++) {
    const rest = Object.fromEntries(order.slice(i).map((k) => [k, (all as Record<string, string>)[k]!]));
    expect(sessionOf(h(rest), body)).toBe("abcde"[i]!);
  }
  expect(sessionOf(h({}), body)).toBe("pck");
  expect(sessionOf(h({}), { model: "m", metadata: { user_id: "uid" }, user: "usr" })).toBe("uid");
  expect(sessionOf(h({}), { model: "m", user: "usr" })).toBe("usr");
  // Empty or non-string values are absent.
  expect(sessionOf(h({ "x-session-id": "" }), { model: "m", prompt_cache_key: "", metadata: { user_id: 7 }, user: ["x"] })).toBeNull();
  expect(sessionOf(h({}), { model: "m", metadata: "user" })).toBeNull();
});

test("CONTRACT §9: affinity is on for an hour by default on keys with more than one lane, off on one lane; 0 stored is off", () => {
  expect(affinityTtlSeconds(null, 2)).toBe(3600);
  expect(affinityTtlSeconds(null, 1)).toBeNull();
  expect(affinityTtlSeconds(null, 0)).toBeNull();
  expect(affinityTtlSeconds(0, 3)).toBeNull();
  expect(affinityTtlSeconds(120, 1)).toBe(120);
});

const lane = (index: number, provider: string, credential: string): ResolvedLane => ({
  provider, model: null, credential_id: credential, sub_session_id: null, bridge_instance_id: null, category_key: null, category_description: null,
  fallback_to_default_model: true, reasoning_effort: null, verbosity: null, service_tier: null, index, credential: { id: credential, apiKeyCiphertext: "" }, bridge: null, subSession: null,
});

test("CONTRACT §9: the session's remembered lane goes first, the rest keep their order; a lane no longer on the key leaves the order as it is", () => {
  const lanes = [lane(0, "openai", "c1"), lane(1, "groq", "c2"), lane(2, "mistral", "c3")];
  const again = affinityFirst(lanes, `1|${laneIdentity(lanes[1]!)}`);
  expect(again.lanes.map((l) => l.index)).toEqual([1, 0, 2]);
  expect(again.found).toBe(true);
  expect(affinityResult({ entry: "e", ttlSeconds: 1, remembered: again.remembered }, lanes[1]!)).toBe("followed");
  expect(affinityResult({ entry: "e", ttlSeconds: 1, remembered: again.remembered }, lanes[0]!)).toBe("moved");
  expect(affinityResult({ entry: "e", ttlSeconds: 1, remembered: null }, lanes[0]!)).toBe("new");
  // The key was rewired: the lane moved to another index (found by its identity), or is gone.
  expect(affinityFirst([lanes[2]!, lanes[1]!].map((l, i) => ({ ...l, index: i })), `2|${laneIdentity(lanes[2]!)}`).lanes[0]!.provider).toBe("mistral");
  const gone = affinityFirst(lanes, "1|groq:c9");
  expect(gone.lanes).toBe(lanes);
  expect(gone.found).toBe(false);
  expect(gone.remembered).toBe("groq:c9");
  expect(affinityFirst(lanes, null)).toEqual({ lanes, remembered: null, found: false });
});
