// CONTRACT §9 "Session affinity" over HTTP: a session's next request tries first the lane that
// served its last successful one (chat, Responses, Messages; plain and streamed), on every instance;
// failover is unchanged and a session whose lane failed sticks to the new one; usage records,
// the records API and the metrics say whether affinity applied.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { and, eq } from "drizzle-orm";
import { REAL_STORES, startTestGateway, storesLabel } from "../helpers/gateway.ts";
import { addRoutingKey, lane, startRelayWorld, usageRows, type RelayWorld } from "../helpers/relay-world.ts";
import { usageRecords } from "../../src/store/db/schema/index.ts";
import { chatBody } from "./fixtures.ts";

describe(`session affinity (${storesLabel})`, () => {
  let w: RelayWorld<"openai" | "groq">;
  beforeAll(async () => {
    w = await startRelayWorld({ providers: ["openai", "groq"] });
  }, 60_000);
  afterAll(async () => {
    await w?.stop();
  }, 60_000);

  /** A two-lane key: openai (mock A) first, groq (mock B) second. */
  const twoLanes = (extra: { sessionAffinityTtlSeconds?: number | null } = {}) =>
    addRoutingKey(w.gw, w.acct.id, { lanes: [lane("openai", w.cred.openai.id), lane("groq", w.cred.groq.id)], ...extra });
  const chat = (raw: string, headers: Record<string, string> = {}, body: Record<string, unknown> = chatBody()) =>
    w.gw.call("/v1/chat/completions", { token: raw, headers, body });
  /** Runs `fn` while lane 1's upstream (mock A) fails with a 500. */
  async function whileAFails<T>(fn: () => Promise<T>): Promise<T> {
    w.up.openai.setDefault({ status: 500 });
    try {
      return await fn();
    } finally {
      w.up.openai.setDefault({});
    }
  }
  const records = (keyId: string) => usageRows(w.gw, eq(usageRecords.routingKeyId, keyId)).then((rows) => rows.sort((a, b) => a.id - b.id));

  test("CONTRACT §9: a session whose lane failed moves to the lane that served it and sticks to it; other requests keep the chain order", async () => {
    const key = await twoLanes();
    const A = w.up.openai, B = w.up.groq;
    const S = { "x-session-id": "sess-move" };
    expect((await whileAFails(() => chat(key.raw, S))).status).toBe(200);
    const a0 = A.received.length, b0 = B.received.length;
    for (let i = 0; i < 3; i++) expect((await chat(key.raw, S)).status).toBe(200);
    expect(A.received.length).toBe(a0);
    expect(B.received.length).toBe(b0 + 3);
    // No session, or another one: the chain's order.
    await chat(key.raw);
    await chat(key.raw, { "x-session-id": "sess-other" });
    expect(A.received.length).toBe(a0 + 2);
    expect(B.received.length).toBe(b0 + 3);

    const rows = await records(key.id);
    expect(rows.map((r) => [r.provider, r.outcome, r.affinity])).toEqual([
      ["openai", "error", "new"], ["groq", "ok", "new"],
      ["groq", "ok", "followed"], ["groq", "ok", "followed"], ["groq", "ok", "followed"],
      ["openai", "ok", null],
      ["openai", "ok", "new"],
    ]);
    // The records API shows it.
    const api = await w.gw.call(`/v1/organizations/usage/records?key=${key.id}`, { token: w.acct.token });
    expect(api.status).toBe(200);
    expect(api.body.records.map((r: { affinity: string | null }) => r.affinity)).toEqual(["new", null, "followed", "followed", "followed", "new", "new"]);
    const metrics = await (await w.gw.req("/metrics")).text();
    expect(metrics).toMatch(/gateway_session_affinity_total\{endpoint="chat",result="followed"\} [3-9]/);
  });

  test("CONTRACT §9: the session lane's failure moves the session again (moved), and it sticks to the new lane", async () => {
    const key = await twoLanes();
    const S = { "x-claude-code-session-id": "sess-back" };
    await chat(key.raw, S); // served by openai: remembered
    w.up.groq.setDefault({});
    const b0 = w.up.groq.received.length;
    await whileAFails(() => chat(key.raw, S)); // openai fails: groq serves (moved)
    await chat(key.raw, S); // groq again, though openai is well
    expect(w.up.groq.received.length).toBe(b0 + 2);
    const rows = await records(key.id);
    expect(rows.map((r) => [r.provider, r.affinity])).toEqual([["openai", "new"], ["openai", "followed"], ["groq", "moved"], ["groq", "followed"]]);
  });

  test("CONTRACT §9: the body's prompt_cache_key (Responses), metadata.user_id (Messages) and user (chat, streamed) name the session", async () => {
    const key = await twoLanes();
    const B = w.up.groq;
    const bodies: Array<[string, Record<string, unknown>]> = [
      ["/v1/responses", { model: "gpt-4o-mini", input: "Hello", prompt_cache_key: "conv-1" }],
      ["/v1/messages", { model: "gpt-4o-mini", max_tokens: 64, messages: [{ role: "user", content: "Hello" }], metadata: { user_id: "user-7" } }],
      ["/v1/chat/completions", { ...chatBody(), user: "u-3", stream: true, stream_options: { include_usage: true } }],
    ];
    for (const [path, body] of bodies) {
      const first = await whileAFails(() => w.gw.req(path, { token: key.raw, body }));
      expect(first.status).toBe(200);
      await first.text();
      const b0 = B.received.length;
      const next = await w.gw.req(path, { token: key.raw, body });
      expect(next.status).toBe(200);
      await next.text();
      expect(B.received.length).toBe(b0 + 1);
    }
  });

  test("CONTRACT §9: session_affinity null (off) keeps the chain order for every request", async () => {
    const key = await twoLanes({ sessionAffinityTtlSeconds: 0 });
    const S = { "x-session-id": "sess-off" };
    await whileAFails(() => chat(key.raw, S));
    const a0 = w.up.openai.received.length;
    await chat(key.raw, S);
    expect(w.up.openai.received.length).toBe(a0 + 1);
    expect((await records(key.id)).map((r) => r.affinity)).toEqual([null, null, null]);
  });

  test("CONTRACT §9: a session idle past ttl_seconds is forgotten (the chain order again, as a new session)", async () => {
    const key = await twoLanes({ sessionAffinityTtlSeconds: 1 });
    const S = { "thread-id": "sess-idle" };
    await whileAFails(() => chat(key.raw, S));
    await Bun.sleep(1_600);
    const a0 = w.up.openai.received.length;
    await chat(key.raw, S);
    expect(w.up.openai.received.length).toBe(a0 + 1);
    expect((await records(key.id)).at(-1)!.affinity).toBe("new");
  });

  test.skipIf(!REAL_STORES)("CONTRACT §9: every instance follows the session's lane (the store is shared)", async () => {
    const other = await startTestGateway({ PROVIDER_OPENAI_BASE_URL: w.up.openai.url, PROVIDER_GROQ_BASE_URL: w.up.groq.url }, { shareWith: w.gw });
    try {
      const key = await twoLanes();
      const S = { "session-id": "sess-fleet" };
      await whileAFails(() => chat(key.raw, S));
      const a0 = w.up.openai.received.length, b0 = w.up.groq.received.length;
      for (let i = 0; i < 3; i++) expect((await other.call("/v1/chat/completions", { token: key.raw, headers: S, body: chatBody() })).status).toBe(200);
      expect(w.up.openai.received.length).toBe(a0);
      expect(w.up.groq.received.length).toBe(b0 + 3);
      await other.ctx.services.usage.flush();
      const followed = await usageRows(w.gw, and(eq(usageRecords.routingKeyId, key.id), eq(usageRecords.affinity, "followed")));
      expect(followed.map((r) => r.provider)).toEqual(["groq", "groq", "groq"]);
    } finally {
      await other.stop();
    }
  }, 60_000);
});
