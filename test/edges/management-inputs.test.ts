// Management inputs at the edges (CONTRACT §8): NUL characters anywhere in a string or id are a
// 400 naming the field, an empty bearer is no key, and account tokens stay listable and
// revocable while the account is unpaid (SPEC signup rule 5).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { addToken, createAccount, startTestGateway, storesLabel, type TestGateway } from "../helpers/gateway.ts";
import { authJson } from "../management/helpers.ts";

let gw: TestGateway;
beforeAll(async () => { gw = await startTestGateway(); }, 60_000);
afterAll(async () => { await gw?.stop(); }, 60_000);

const NUL = "\u0000";

describe(`CONTRACT §8: a NUL character in a management string or id is 400 bad_request naming the field (${storesLabel})`, () => {
  const cases: Array<{ name: string; path: string; method: string; body?: unknown; field: string }> = [
    { name: "routing key label", path: "/v1/organizations/routing-keys", method: "POST", body: { label: `a${NUL}b` }, field: "`label`" },
    { name: "lane model", path: "/v1/organizations/routing-keys", method: "POST", body: { providers: [{ provider: "openai", model: `gpt${NUL}` }] }, field: "`providers[0].model`" },
    { name: "lane credential id", path: "/v1/organizations/routing-keys", method: "POST", body: { providers: [{ provider: "openai", credential_id: `cred_${NUL}` }] }, field: "`providers[0].credential_id`" },
    { name: "classifier instructions", path: "/v1/organizations/routing-keys", method: "POST", body: { mode: "classifier", classifier_instructions: `pick the best lane ${NUL} please` }, field: "`classifier_instructions`" },
    { name: "PATCH ?id=%00", path: "/v1/organizations/routing-keys?id=%00", method: "PATCH", body: { label: "x" }, field: "`id`" },
    { name: "legacy PATCH ?id=%00", path: "/v1/routing-keys?id=key%00", method: "PATCH", body: { label: "x" }, field: "`id`" },
    { name: "token revoke ?id=%00", path: "/v1/organizations/tokens?id=%00", method: "DELETE", field: "`id`" },
    { name: "token label", path: "/v1/organizations/tokens", method: "POST", body: { scope: "read_only", label: `l${NUL}` }, field: "`label`" },
    { name: "credential label", path: "/v1/organizations/credentials", method: "POST", body: { provider: "openai", api_key: "sk-test-abcdefgh1234", label: `l${NUL}` }, field: "`label`" },
    { name: "credential api key", path: "/v1/organizations/credentials", method: "POST", body: { provider: "openai", api_key: `sk-test-abc${NUL}defgh1234` }, field: "`api_key`" },
    { name: "credential delete ?id=%00", path: "/v1/organizations/credentials?id=%00", method: "DELETE", field: "`id`" },
    { name: "bridge label", path: "/v1/organizations/bridges", method: "POST", body: { base_url: "http://127.0.0.1:9", token: "bridge-token-1234", label: `b${NUL}` }, field: "`label`" },
    { name: "bridge region", path: "/v1/organizations/bridges", method: "POST", body: { base_url: "http://127.0.0.1:9", token: "bridge-token-1234", region: `r${NUL}` }, field: "`region`" },
    { name: "bridge revoke ?id=%00", path: "/v1/organizations/bridges?id=%00", method: "DELETE", field: "`id`" },
    { name: "sub session source_path", path: "/v1/organizations/sub-session", method: "POST", body: { auth_json: authJson(), source_path: `/home/a${NUL}/auth.json` }, field: "`source_path`" },
    { name: "sign-in file token", path: "/v1/organizations/sub-session", method: "POST", body: { auth_json: { ...authJson(), tokens: { ...authJson().tokens, account_id: `acc${NUL}` } } }, field: "`auth_json.tokens.account_id`" },
    { name: "sign-in file given as JSON text", path: "/v1/organizations/sub-session", method: "POST", body: { auth_json: JSON.stringify({ ...authJson(), last_refresh: `x${NUL}` }) }, field: "`auth_json.last_refresh`" },
    { name: "usage query", path: "/v1/organizations/usage?key_id=%00", method: "GET", field: "`key_id`" },
    { name: "an unknown field's name", path: "/v1/organizations/routing-keys", method: "POST", body: { [`la${NUL}bel`]: "x" }, field: "the request body" },
  ];
  for (const c of cases) {
    test(`${c.name}: ${c.method} ${c.path}`, async () => {
      const a = await createAccount(gw);
      const r = await gw.call(c.path, { method: c.method, token: a.token, body: c.body });
      expect(r.status).toBe(400);
      expect(r.body.code).toBe("bad_request");
      expect(r.body.error).toContain(c.field);
      expect(r.body.error).toContain("NUL");
    });
  }

  test("the inference-side `/v1/key` and `/v1/models` do not choke on a NUL in the query either", async () => {
    const r = await gw.call("/v1/models?x=%00");
    expect(r.status).toBeLessThan(500);
  });
});

describe(`CONTRACT §8: \`Authorization: Bearer \` with nothing after it is no key (${storesLabel})`, () => {
  for (const header of ["Bearer ", "Bearer     ", "bearer"]) {
    test(`inference with ${JSON.stringify(header)} → 401 signup_required`, async () => {
      const r = await gw.call("/v1/chat/completions", { headers: { authorization: header }, body: { model: "gpt-4o-mini", messages: [{ role: "user", content: "hi" }] } });
      expect(r.status).toBe(401);
      expect(r.body.error.code).toBe("signup_required");
    });
    test(`management with ${JSON.stringify(header)} → 401 without code`, async () => {
      const r = await gw.call("/v1/organizations/routing-keys", { headers: { authorization: header } });
      expect(r.status).toBe(401);
      expect(r.body.code).toBeUndefined();
      expect(typeof r.body.error).toBe("string");
    });
  }
});

describe(`CONTRACT §8 / SPEC signup rule 5: account tokens are listed and revoked while unpaid (${storesLabel})`, () => {
  test("a free account lists and revokes its tokens; the revoked one then answers 401 invalid_account_token", async () => {
    const a = await createAccount(gw, { plan: "free" });
    const second = await addToken(gw, a.id, "read_only");
    const list = await gw.call("/v1/organizations/tokens", { token: a.token });
    expect(list.status).toBe(200);
    expect(list.body.tokens).toHaveLength(2);
    const target = list.body.tokens.find((t: any) => second.startsWith(t.prefix));
    expect(target).toBeDefined();
    const del = await gw.call(`/v1/organizations/tokens?id=${target.id}`, { method: "DELETE", token: a.token });
    expect(del.status).toBe(200);
    expect(del.body).toEqual({ revoked: true });
    const gone = await gw.call("/v1/organizations/tokens", { token: second });
    expect(gone.status).toBe(401);
    expect(gone.body.code).toBe("invalid_account_token");
  });

  test("every other management path stays behind the plan gate (402 payment_required), creating a token included", async () => {
    const a = await createAccount(gw, { plan: "free" });
    const paths: Array<[string, string, unknown?]> = [
      ["POST", "/v1/organizations/tokens", { scope: "read_only" }],
      ["GET", "/v1/organizations/routing-keys"],
      ["POST", "/v1/organizations/routing-keys", {}],
      ["GET", "/v1/organizations/credentials"],
      ["GET", "/v1/organizations/bridges"],
      ["GET", "/v1/organizations/sub-session"],
      ["GET", "/v1/organizations/usage"],
    ];
    for (const [method, path, body] of paths) {
      const r = await gw.call(path, { method, token: a.token, body });
      expect([method, path, r.status, r.body.code]).toEqual([method, path, 402, "payment_required"]);
    }
    expect((await gw.call("/v1/organizations/me", { token: a.token })).status).toBe(200);
  });

  test("a read-only token of an unpaid account can list but not revoke (403 before 402)", async () => {
    const a = await createAccount(gw, { plan: "free" });
    const rk = await addToken(gw, a.id, "read_only");
    expect((await gw.call("/v1/organizations/tokens", { token: rk })).status).toBe(200);
    const r = await gw.call("/v1/organizations/tokens?id=tok_x", { method: "DELETE", token: rk });
    expect(r.status).toBe(403);
  });
});
