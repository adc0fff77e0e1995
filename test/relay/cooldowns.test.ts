// CONTRACT §9 "Lane cooldowns" over HTTP: a lane failing for a retryable cause is skipped by every
// instance until its cooldown ends, then probed back, one probe at a time; Retry-After sets the
// cooldown; a chain whose every lane cools still tries the one that cools off first; GET /v1/key,
// the metrics and the access line show it.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createAccount, REAL_STORES, startTestGateway, storesLabel, type TestGateway } from "../helpers/gateway.ts";
import { startMockOpenAI, type MockUpstream } from "../mocks/openai-upstream.ts";
import { startBlackHole, type BlackHole } from "../mocks/black-hole.ts";
import { until } from "../helpers/until.ts";
import { addCredential, addRoutingKey, chatBody, lane } from "./fixtures.ts";

const accessLines = (gw: TestGateway) =>
  gw.logs.flatMap((chunk) => chunk.split("\n")).filter(Boolean).map((l) => JSON.parse(l)).filter((l) => l.log === "access");

describe(`lane cooldowns (${storesLabel})`, () => {
  let gw: TestGateway;
  let hole: BlackHole, A: MockUpstream, B: MockUpstream, C: MockUpstream;
  let acct: { id: string; token: string };
  const env = {
    // The black hole's lane waits for the upstream timeout as configured here; cooldowns as by default but quicker.
    UPSTREAM_TIMEOUT_SECONDS: "1",
    LANE_COOLDOWN_FAILURES: "3",
    LANE_COOLDOWN_BASE_SECONDS: "1",
  };

  beforeAll(async () => {
    [hole, A, B, C] = await Promise.all([startBlackHole(), startMockOpenAI(), startMockOpenAI(), startMockOpenAI()]);
    gw = await startTestGateway({
      ...env,
      PROVIDER_CEREBRAS_BASE_URL: hole.url,
      PROVIDER_OPENAI_BASE_URL: A.url,
      PROVIDER_GROQ_BASE_URL: B.url,
      PROVIDER_MISTRAL_BASE_URL: C.url,
    });
    acct = await createAccount(gw);
  }, 60_000);
  afterAll(async () => {
    await gw?.stop();
    await Promise.all([hole, A, B, C].map((m) => m?.stop()));
  }, 60_000);

  /** A key whose first lane is `first` (a fresh saved key: its own cooldown) and whose second is groq (mock B). */
  async function keyWith(first: string) {
    const c1 = await addCredential(gw, acct.id, first);
    const c2 = await addCredential(gw, acct.id, "groq");
    return addRoutingKey(gw, acct.id, { lanes: [lane(first, c1.id), lane("groq", c2.id)] });
  }
  const chat = (raw: string) => gw.call("/v1/chat/completions", { token: raw, body: chatBody() });
  /** Lane 1's cooldown_until once this instance holds it (the failure reaches the store off the request's path). */
  const coolingUntil = (raw: string) => until("lane 1 cooling", async () => (await gw.call("/v1/key", { token: raw })).body.lanes[0].cooldown_until ?? null, 3_000, 20);
  /** One request while lane 1's upstream (mock A) answers as `mock` says. */
  async function withA<T>(mock: Record<string, unknown>, run: () => Promise<T>): Promise<T> {
    A.setDefault(mock);
    try {
      return await run();
    } finally {
      A.setDefault({});
    }
  }

  test("CONTRACT §9: a black-hole lane (connects, never answers) costs the upstream timeout to the first few of 100 requests only, and is probed back once it recovers", async () => {
    const key = await keyWith("cerebras");
    const slow: number[] = [];
    for (let i = 0; i < 100; i++) {
      const t0 = performance.now();
      const r = await chat(key.raw);
      expect(r.status).toBe(200);
      if (performance.now() - t0 > 800) slow.push(i);
    }
    // LANE_COOLDOWN_FAILURES (3) timeouts cool the lane; the probes after each cooldown (1 s, then 2 s, 4 s…) wait too.
    expect(slow.length).toBeGreaterThanOrEqual(3);
    expect(slow.slice(0, 3)).toEqual([0, 1, 2]);
    expect(slow.length).toBeLessThanOrEqual(6);
    expect(hole.connections).toBeLessThanOrEqual(6);

    const info = await gw.call("/v1/key", { token: key.raw });
    expect(info.status).toBe(200);
    const until0 = Date.parse(info.body.lanes[0].cooldown_until);
    expect(until0).toBeGreaterThan(Date.now());
    expect(info.body.lanes[1].cooldown_until).toBeNull();

    // The lane recovers: once its cooldown ends, a probe reaches it, serves, and the lane is back for everyone.
    hole.recover(A.url);
    const a0 = A.received.length;
    await until("the recovered lane to serve again", async () => {
      await chat(key.raw);
      return A.received.length > a0 ? true : null;
    }, 40_000, 250);
    const served = A.received.length;
    for (let i = 0; i < 5; i++) expect((await chat(key.raw)).status).toBe(200);
    expect(A.received.length).toBe(served + 5);
    expect((await gw.call("/v1/key", { token: key.raw })).body.lanes[0].cooldown_until).toBeNull();
  }, 120_000);

  test("CONTRACT §9: a 429 with Retry-After cools the lane at once for that long, then one probe tests it", async () => {
    const key = await keyWith("openai");
    const a0 = A.received.length, b0 = B.received.length;
    const t0 = Date.now();
    expect((await withA({ status: 429, retry_after: "3" }, () => chat(key.raw))).status).toBe(200); // served by groq
    expect(A.received.length).toBe(a0 + 1);
    const cooldown = Date.parse(await coolingUntil(key.raw)) - t0;
    expect(cooldown).toBeGreaterThan(2_500);
    expect(cooldown).toBeLessThan(3_600);
    // While it cools, no request reaches it.
    for (let i = 0; i < 5; i++) expect((await chat(key.raw)).status).toBe(200);
    expect(A.received.length).toBe(a0 + 1);
    expect(B.received.length).toBe(b0 + 6);
    // The access line names the lane passed over; the metrics count it.
    const metrics = await (await gw.req("/metrics")).text();
    const line = await until("the access line", async () => accessLines(gw).findLast((l) => l.key_prefix === key.raw.slice(0, 10) && l.lanes) ?? null, 2_000, 20);
    expect(line.cooling_lanes).toEqual([0]);
    expect(line.lanes).toEqual([{ provider: "groq", lane: 1, status: 200 }]);
    expect(metrics).toMatch(/gateway_lanes_cooling\{provider="openai"\} [1-9]/);
    expect(metrics).toMatch(/gateway_lane_skips_total\{provider="openai"\} [1-9]/);
    expect(metrics).toMatch(/gateway_lane_cooldowns_total\{provider="openai"\} [1-9]/);

    // Half-open: once it ends, of five requests at once exactly one (the probe) goes to the lane.
    await Bun.sleep(Math.max(0, t0 + cooldown + 50 - Date.now()));
    const a1 = A.received.length;
    const rs = await withA({ latency_ms: 400 }, () => Promise.all(Array.from({ length: 5 }, () => chat(key.raw))));
    for (const r of rs) expect(r.status).toBe(200);
    expect(A.received.length).toBe(a1 + 1);
    // The probe served: the lane is everyone's first again.
    const a2 = A.received.length;
    for (let i = 0; i < 3; i++) await chat(key.raw);
    expect(A.received.length).toBe(a2 + 3);
  }, 60_000);

  test("CONTRACT §9: a probe that fails cools the lane again, for twice as long", async () => {
    const key = await keyWith("openai");
    const cooled = async (mock: Record<string, unknown>) => {
      const t0 = Date.now();
      await withA(mock, () => chat(key.raw));
      return Date.parse(await coolingUntil(key.raw)) - t0;
    };
    // Three 503s without Retry-After: the base cooldown (1 s here).
    for (let i = 0; i < 2; i++) await withA({ status: 503 }, () => chat(key.raw));
    const first = await cooled({ status: 503 });
    expect(first).toBeGreaterThan(500);
    expect(first).toBeLessThan(1_600);
    await Bun.sleep(first + 50);
    const second = await cooled({ status: 503 }); // the probe fails
    expect(second).toBeGreaterThan(1_500);
    expect(second).toBeLessThan(2_600);
  }, 30_000);

  test("CONTRACT §9: when every lane is cooling, the one that cools off first is still tried", async () => {
    const c1 = await addCredential(gw, acct.id, "openai");
    const c2 = await addCredential(gw, acct.id, "mistral");
    const key = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", c1.id), lane("mistral", c2.id)] });
    // Lane 1 cools for 20 s, lane 2 for 5 s (each vendor's Retry-After).
    A.setDefault({ status: 429, retry_after: "20" });
    C.setDefault({ status: 503, retry_after: "5" });
    try {
      expect((await chat(key.raw)).status).toBe(502);
      // The failures reach the store off the request's path: wait until this instance holds both as cooling.
      await until("both lanes cooling", async () => {
        const lanes = (await gw.call("/v1/key", { token: key.raw })).body.lanes;
        return lanes.every((l: { cooldown_until: string | null }) => l.cooldown_until !== null) ? true : null;
      }, 3_000, 20);
      const a0 = A.received.length, c0 = C.received.length;
      C.setDefault({});
      const r = await chat(key.raw);
      expect(r.status).toBe(200);
      expect(A.received.length).toBe(a0);
      expect(C.received.length).toBe(c0 + 1);
    } finally {
      A.setDefault({});
      C.setDefault({});
    }
  }, 30_000);

  test("CONTRACT §9: a refusal of the request itself (400) does not cool the lane", async () => {
    const key = await keyWith("openai");
    const a0 = A.received.length;
    for (let i = 0; i < 5; i++) await withA({ status: 400 }, () => chat(key.raw));
    expect(A.received.length).toBe(a0 + 5);
    expect((await gw.call("/v1/key", { token: key.raw })).body.lanes[0].cooldown_until).toBeNull();
  });

  test.skipIf(!REAL_STORES)("CONTRACT §9: two instances share the cooldown: one cools the lane, the other skips it", async () => {
    const other = await startTestGateway({ ...env, PROVIDER_OPENAI_BASE_URL: A.url, PROVIDER_GROQ_BASE_URL: B.url }, { shareWith: gw });
    try {
      const key = await keyWith("openai");
      const t0 = Date.now();
      await withA({ status: 429, retry_after: "4" }, () => chat(key.raw));
      const a0 = A.received.length, b0 = B.received.length;
      const seen = await until("the other instance to hear of the cooldown", async () => {
        const info = await other.call("/v1/key", { token: key.raw });
        return info.body.lanes[0].cooldown_until ?? null;
      }, 3_000, 20);
      expect(Math.abs(Date.parse(seen) - (t0 + 4_000))).toBeLessThan(700);
      for (let i = 0; i < 4; i++) expect((await other.call("/v1/chat/completions", { token: key.raw, body: chatBody() })).status).toBe(200);
      expect(A.received.length).toBe(a0);
      expect(B.received.length).toBe(b0 + 4);
      // A lane cooled elsewhere before this instance started is learnt from the store's answer to one failure.
      const key2 = await keyWith("openai");
      await withA({ status: 429, retry_after: "10" }, () => chat(key2.raw));
      const third = await startTestGateway({ ...env, PROVIDER_OPENAI_BASE_URL: A.url, PROVIDER_GROQ_BASE_URL: B.url }, { shareWith: gw });
      try {
        const a1 = A.received.length;
        await withA({ status: 500 }, () => third.call("/v1/chat/completions", { token: key2.raw, body: chatBody() }));
        expect(A.received.length).toBe(a1 + 1);
        await Bun.sleep(100);
        for (let i = 0; i < 3; i++) await third.call("/v1/chat/completions", { token: key2.raw, body: chatBody() });
        expect(A.received.length).toBe(a1 + 1);
      } finally {
        await third.stop();
      }
    } finally {
      await other.stop();
    }
  }, 60_000);
});
