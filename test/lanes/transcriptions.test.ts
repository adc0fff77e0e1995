// POST /v1/audio/transcriptions through the connected sign-in (CONTRACT §4), and GET /v1/models
// listing the live subscription catalog for a key's sub lanes.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { monthKey } from "../../src/lib/time.ts";
import { settle } from "../../src/money/counters.ts";
import { storesLabel } from "../helpers/gateway.ts";
import { connectSub, createKey, startSubWorldWithOpenAI, usageOf, type SubOpenAIWorld } from "./helpers.ts";

let w: SubOpenAIWorld;

beforeAll(async () => {
  w = await startSubWorldWithOpenAI("sk-test-openai-2222222222");
}, 60_000);
afterAll(() => w.stop(), 60_000);

function audioForm(bytes = 4096, extra: Record<string, string> = { model: "gpt-4o-transcribe" }): FormData {
  const f = new FormData();
  const data = new Uint8Array(bytes);
  for (let i = 0; i < bytes; i++) data[i] = i % 251;
  f.append("file", new File([data], "clip.wav", { type: "audio/wav" }));
  for (const [k, v] of Object.entries(extra)) f.append(k, v);
  return f;
}

const transcribe = (rawKey: string | null, body: FormData | string, headers: Record<string, string> = {}) =>
  fetch(`${w.gw.url}/v1/audio/transcriptions`, {
    method: "POST",
    headers: { ...(rawKey ? { authorization: `Bearer ${rawKey}` } : {}), ...headers },
    body,
  });

const audioCalls = () => w.backend.received.filter((r) => r.path === "/audio/transcriptions");

describe(`POST /v1/audio/transcriptions (${storesLabel})`, () => {
  test("forwards the multipart body to {SUB_API_BASE_URL}/audio/transcriptions with the sign-in's headers and relays the answer", async () => {
    const { sessionId, subAccountId, authJson } = await connectSub(w);
    const { rawKey, key } = await createKey(w.gw, w.account.token, { providers: [{ provider: "openai", credential_id: w.openaiCred }, { provider: "sub", sub_session_id: sessionId }] });
    const res = await transcribe(rawKey, audioForm(4096, { model: "gpt-4o-transcribe", language: "en" }));
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ text: "transcribed clip.wav (4096 bytes, model gpt-4o-transcribe)" });
    const got = audioCalls().at(-1)!;
    expect(got.headers.authorization).toBe(`Bearer ${authJson.tokens.access_token}`);
    expect(got.headers["chatgpt-account-id"]).toBe(subAccountId);
    expect(got.headers["content-type"]).toStartWith("multipart/form-data; boundary=");
    expect(got.body).toMatchObject({ file: { name: "clip.wav", size: 4096 }, model: "gpt-4o-transcribe", language: "en" });
    expect(got.body.file.type).toContain("wav");
    expect(JSON.stringify(got.headers)).not.toContain(rawKey);
    const rows = (await usageOf(w.gw, key.id)).filter((r) => r.endpoint === "transcriptions");
    expect(rows.length).toBe(1);
    expect(rows[0]!.seat).toBe(true);
    expect(rows[0]!.provider).toBe("sub");
  });

  test("a token refused with 401 is refreshed and the upload retried once, whole", async () => {
    const { sessionId, subAccountId, authJson } = await connectSub(w);
    const { rawKey } = await createKey(w.gw, w.account.token, { providers: [{ provider: "sub", sub_session_id: sessionId }] });
    w.backend.revoke(authJson.tokens.access_token);
    const before = w.auth.refreshes;
    const res = await transcribe(rawKey, audioForm(200_000));
    expect(res.status).toBe(200);
    expect(((await res.json()) as any).text).toContain("(200000 bytes");
    expect(w.auth.refreshes).toBe(before + 1);
    expect(audioCalls().at(-1)!.headers.authorization).toBe(`Bearer ${w.auth.latest(subAccountId)!.access_token}`);
  });

  test("a transcription counts toward rpm_limit (CONTRACT §8): OpenAI's rate-limit headers, then 429 rate_limit_exceeded", async () => {
    const { sessionId } = await connectSub(w);
    const { rawKey } = await createKey(w.gw, w.account.token, { rpm_limit: 1, providers: [{ provider: "sub", sub_session_id: sessionId }] });
    const first = await transcribe(rawKey, audioForm());
    expect(first.status).toBe(200);
    await first.text();
    expect(first.headers.get("x-ratelimit-limit-requests")).toBe("1");
    expect(first.headers.get("x-ratelimit-remaining-requests")).toBe("0");
    const second = await transcribe(rawKey, audioForm());
    expect(second.status).toBe(429);
    expect(((await second.json()) as any).error).toMatchObject({ type: "requests", code: "rate_limit_exceeded" });
    expect(Number(second.headers.get("retry-after-ms"))).toBeGreaterThan(0);
  });

  test("400 unsupported_feature when the key has no connected sub lane", async () => {
    const { rawKey } = await createKey(w.gw, w.account.token, { providers: [{ provider: "openai", credential_id: w.openaiCred }] });
    const res = await transcribe(rawKey, audioForm());
    expect(res.status).toBe(400);
    const body = (await res.json()) as any;
    expect(body.error.code).toBe("unsupported_feature");
    expect(body.error.type).toBe("invalid_request_error");
    expect(body.error.message).toContain("sub");

    const { sessionId } = await connectSub(w);
    const { rawKey: subKey } = await createKey(w.gw, w.account.token, { providers: [{ provider: "sub", sub_session_id: sessionId }] });
    expect((await w.gw.call("/v1/organizations/sub-session", { method: "DELETE", token: w.account.token })).status).toBe(200);
    const revoked = await transcribe(subKey, audioForm());
    expect(revoked.status).toBe(400);
    expect(((await revoked.json()) as any).error.code).toBe("unsupported_feature");
  });

  test("a body that is not multipart is a 400 in the nested shape", async () => {
    const { sessionId } = await connectSub(w);
    const { rawKey } = await createKey(w.gw, w.account.token, { providers: [{ provider: "sub", sub_session_id: sessionId }] });
    const res = await transcribe(rawKey, JSON.stringify({ file: "x" }), { "content-type": "application/json" });
    expect(res.status).toBe(400);
    const body = (await res.json()) as any;
    expect(body.error.type).toBe("invalid_request_error");
    expect(body.error.message).toContain("multipart/form-data");
  });

  test("no key → 401 signup_required; wrong method → 405 without code", async () => {
    const res = await transcribe(null, audioForm());
    expect(res.status).toBe(401);
    expect(((await res.json()) as any).error.code).toBe("signup_required");
    const get = await fetch(`${w.gw.url}/v1/audio/transcriptions`);
    expect(get.status).toBe(405);
    const body = (await get.json()) as any;
    expect(body.error.message).toBeString();
    expect(body.error).toMatchObject({ param: null, code: null }); // CONTRACT §8: "without code" is code: null
  });
});

describe(`transcription limits (${storesLabel})`, () => {
  test("an upload over 25 MB is refused with 413 before reaching the backend", async () => {
    const { sessionId } = await connectSub(w);
    const { rawKey } = await createKey(w.gw, w.account.token, { providers: [{ provider: "sub", sub_session_id: sessionId }] });
    const before = audioCalls().length;
    const res = await transcribe(rawKey, audioForm(25 * 1024 * 1024 + 1));
    expect(res.status).toBe(413);
    expect(((await res.json()) as any).error.message).toContain("larger than");
    expect(audioCalls().length).toBe(before);
  });

  test("402 budget_exceeded when the month's budget is spent and seat traffic counts; allowed while budget_excludes_seats", async () => {
    const { sessionId } = await connectSub(w);
    const spent = async (excludes: boolean) => {
      const { rawKey, key } = await createKey(w.gw, w.account.token, {
        monthly_budget_usd: 0.5, budget_excludes_seats: excludes, providers: [{ provider: "sub", sub_session_id: sessionId }],
      });
      // The month's spend reaches the budget (recorded through the budget counters).
      await settle(w.gw.ctx, { id: key.id, monthlyBudgetUsd: 0.5, budgetExcludesSeats: excludes }, { keyId: key.id, month: monthKey(), nano: 0 }, 0.5);
      return rawKey;
    };
    const counted = await transcribe(await spent(false), audioForm());
    expect(counted.status).toBe(402);
    expect(((await counted.json()) as any).error.code).toBe("budget_exceeded");
    const excluded = await transcribe(await spent(true), audioForm());
    expect(excluded.status).toBe(200);
  });
});

describe(`GET /v1/models with a key (${storesLabel})`, () => {
  test("lists the live subscription catalog of the key's sub lanes, plus the sub tiers", async () => {
    w.backend.setModels(["gpt-5.1-codex", "gpt-5.1-codex-mini", "live-only-model-7"]);
    const { sessionId } = await connectSub(w);
    const { rawKey } = await createKey(w.gw, w.account.token, { providers: [{ provider: "sub", sub_session_id: sessionId }] });
    const r = await w.gw.call("/v1/models", { token: rawKey });
    expect(r.status).toBe(200);
    expect(r.body.object).toBe("list");
    const ids = r.body.data.map((m: any) => m.id);
    for (const id of ["gpt-5.1-codex", "gpt-5.1-codex-mini", "live-only-model-7", "flagship", "mini", "sub/flagship", "sub/mini"]) expect(ids).toContain(id);
    for (const m of r.body.data) {
      expect(m.object).toBe("model");
      expect(Number.isInteger(m.created)).toBe(true);
      expect(typeof m.owned_by).toBe("string");
    }
    // Without a key: the general catalog, no live subscription models.
    const general = await w.gw.call("/v1/models");
    expect(general.body.data.map((m: any) => m.id)).not.toContain("live-only-model-7");
    w.backend.setModels(["gpt-5.1-codex", "gpt-5.1-codex-mini", "gpt-5"]);
  });

  test("a sub lane whose backend cannot list models lists nothing: no tier can resolve, and never another vendor's catalog", async () => {
    const { sessionId } = await connectSub(w);
    const { rawKey } = await createKey(w.gw, w.account.token, { providers: [{ provider: "sub", sub_session_id: sessionId }] });
    w.backend.setFail(503);
    try {
      const r = await w.gw.call("/v1/models", { token: rawKey });
      expect(r.status).toBe(200);
      expect(r.body.data).toEqual([]);
    } finally {
      w.backend.setFail(null);
    }
  });
});
