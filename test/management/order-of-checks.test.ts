// Order of checks on the management paths (CONTRACT §8): wrong method 405 → missing/unknown token
// 401 → removed account 410 → rk_ on a write 403 → unpaid 402 → body and query validation 400 →
// ids that are not the caller's 400. The body is read only after authentication; unknown fields
// and query parameters are refused by name, so mass assignment is impossible.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { eq } from "drizzle-orm";
import { addToken, createAccount, startTestGateway, storesLabel, type TestGateway } from "../helpers/gateway.ts";
import { accounts, routingKeys } from "../../src/store/db/schema/index.ts";
import { saveCredential } from "./helpers.ts";

let gw: TestGateway;
let pro: { id: string; token: string; rk: string };
let unpaid: { id: string; token: string; rk: string };
let removed: { id: string; token: string; rk: string };

beforeAll(async () => {
  gw = await startTestGateway();
  const mk = async (plan: "pro" | "free") => {
    const a = await createAccount(gw, { plan });
    return { ...a, rk: await addToken(gw, a.id, "read_only") };
  };
  pro = await mk("pro");
  unpaid = await mk("free");
  removed = await mk("pro");
  await gw.ctx.db.update(accounts).set({ removedAt: new Date() }).where(eq(accounts.id, removed.id));
}, 60_000);
afterAll(async () => { await gw?.stop(); }, 60_000);

type M = "GET" | "POST" | "PATCH" | "DELETE";
const PATHS: Array<{ path: string; methods: M[]; wrong: M[] }> = [
  { path: "/v1/organizations/routing-keys", methods: ["GET", "POST", "PATCH"], wrong: ["DELETE"] },
  { path: "/v1/organizations/credentials", methods: ["GET", "POST", "DELETE"], wrong: ["PATCH"] },
  { path: "/v1/organizations/bridges", methods: ["GET", "POST", "DELETE"], wrong: ["PATCH"] },
  { path: "/v1/organizations/sub-session", methods: ["GET", "POST", "DELETE"], wrong: ["PATCH"] },
  { path: "/v1/organizations/usage", methods: ["GET"], wrong: ["POST", "DELETE"] },
  { path: "/v1/routing-keys", methods: ["GET", "POST", "PATCH"], wrong: ["DELETE"] },
  { path: "/v1/bridges", methods: ["GET", "POST", "DELETE"], wrong: ["PATCH"] },
];

/** A request that is wrong at every later stage: bad query parameter and, on writes, a body that is not JSON. */
function call(path: string, method: M, token: string | null) {
  const body = method === "GET" || method === "DELETE" ? undefined : "{not json";
  return gw.call(`${path}?bogus_param=1`, { method, token, body });
}

describe(`order of checks (${storesLabel})`, () => {
  for (const { path, methods, wrong } of PATHS) {
    for (const m of wrong) {
      test(`405 first: ${m} ${path} answers 405 method_not_allowed even without a token`, async () => {
        const r = await call(path, m, null);
        expect([r.status, r.body.code]).toEqual([405, "method_not_allowed"]);
      });
    }
    for (const m of methods) {
      const write = m !== "GET";
      test(`${m} ${path}: 401 (no token, no code; unknown token invalid_account_token) before the body is read`, async () => {
        const none = await call(path, m, null);
        expect(none.status).toBe(401);
        expect(none.body.code).toBeUndefined();
        const unknown = await call(path, m, "sk_unknowntoken000000000000000000000000000000");
        expect([unknown.status, unknown.body.code]).toEqual([401, "invalid_account_token"]);
      });
      test(`${m} ${path}: a removed account answers 410 account_expired before 403, 402 and 400`, async () => {
        const r = await call(path, m, write ? removed.rk : removed.token);
        expect([r.status, r.body.code]).toEqual([410, "account_expired"]);
      });
      if (write) {
        test(`${m} ${path}: an rk_ token answers 403 read_only_token before 402 and 400`, async () => {
          const r = await call(path, m, unpaid.rk);
          expect([r.status, r.body.code]).toEqual([403, "read_only_token"]);
        });
      }
      test(`${m} ${path}: an unpaid account answers 402 payment_required (with payment block) before 400`, async () => {
        const r = await call(path, m, unpaid.token);
        expect([r.status, r.body.code]).toEqual([402, "payment_required"]);
        expect(r.body.payment.checkout_url).toBeString();
      });
      test(`${m} ${path}: then validation answers 400 bad_request naming the unknown query parameter`, async () => {
        const r = await call(path, m, pro.token);
        expect([r.status, r.body.code]).toEqual([400, "bad_request"]);
        expect(r.body.error).toContain("`bogus_param`");
      });
    }
  }

  test("a body that is not JSON is 400 bad_request once the caller passed auth and the gate", async () => {
    const r = await gw.call("/v1/organizations/bridges", { method: "POST", token: pro.token, body: "{not json" });
    expect([r.status, r.body.code]).toEqual([400, "bad_request"]);
    const arr = await gw.call("/v1/organizations/credentials", { method: "POST", token: pro.token, body: [1] });
    expect([arr.status, arr.body.code]).toEqual([400, "bad_request"]);
  });

  test("body validation comes before the ownership check: an invalid body that also names a foreign id is reported for the invalid field", async () => {
    const other = await createAccount(gw);
    const foreign = await saveCredential(gw, other.token, "openai");
    const r = await gw.call("/v1/organizations/routing-keys", {
      method: "POST", token: pro.token,
      body: { label: "x".repeat(61), providers: [{ provider: "openai", credential_id: foreign.id }] },
    });
    expect(r.status).toBe(400);
    expect(r.body.error).toContain("`label`");
  });

  test("mass assignment is refused: plan, account_id, spend and ids in a body are 400 naming the field, and nothing changes", async () => {
    const other = await createAccount(gw);
    const cases: Array<[string, unknown]> = [
      ["/v1/organizations/routing-keys", { plan: "pro" }],
      ["/v1/organizations/routing-keys", { account_id: other.id }],
      ["/v1/organizations/routing-keys", { current_month_spend_usd: 0 }],
      ["/v1/organizations/routing-keys", { key_hash: "00" }],
      ["/v1/organizations/credentials", { provider: "openai", api_key: "sk-abcdefgh12345", account_id: other.id }],
      ["/v1/organizations/bridges", { base_url: "http://127.0.0.1:9", token: "abcdefgh12", id: "brg_chosen" }],
      ["/v1/organizations/sub-session", { auth_json: { tokens: { access_token: "a", refresh_token: "b" } }, plan: "pro" }],
    ];
    for (const [path, body] of cases) {
      const r = await gw.call(path, { method: "POST", token: pro.token, body });
      expect([r.status, r.body.code]).toEqual([400, "bad_request"]);
      const field = Object.keys(body as object).find((k) => !["provider", "api_key", "base_url", "token", "auth_json"].includes(k))!;
      expect(r.body.error).toContain(`\`${field}\``);
    }
    expect(await gw.ctx.db.select().from(routingKeys).where(eq(routingKeys.accountId, other.id))).toEqual([]);
    const [acct] = await gw.ctx.db.select().from(accounts).where(eq(accounts.id, pro.id));
    expect(acct!.plan).toBe("pro");
  });

  test("an error message is one plain sentence naming the field", async () => {
    const r = await gw.call("/v1/organizations/routing-keys", { method: "POST", token: pro.token, body: { providers: [{ provider: "sub", sub_session_id: 5 }] } });
    expect(r.status).toBe(400);
    expect(r.body.error).toBe("`providers[0].sub_session_id` must be a string, not a number.");
  });
});
