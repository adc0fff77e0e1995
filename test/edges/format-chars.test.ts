// Text a person reads refuses invisible and bidirectional format characters (Unicode Cf: U+202E,
// U+200B, U+2066…) with a 400 naming the field: labels, names, lane model ids, signup source.
// What came from inference (a request's `model`) is stored as sent, and the dashboard spells the
// characters out instead of letting them reorder what it shows.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { eq } from "drizzle-orm";
import { formatCharIn, spellOutFormatChars } from "../../src/lib/format-chars.ts";
import { usageRecords } from "../../src/store/db/schema/index.ts";
import { createAccount, startTestGateway, storesLabel, type TestGateway } from "../helpers/gateway.ts";
import { randomEmail, signupCall } from "../helpers/signup.ts";
import { startMockOpenAI, type MockUpstream } from "../mocks/openai-upstream.ts";
import { addCredential, addRoutingKey, chatBody, lane } from "../relay/fixtures.ts";

// The dashboard's browser module (plain JS, no types).
const DASHBOARD_DOM: string = "../../src/dashboard/public/dom.js";
const { visible } = (await import(DASHBOARD_DOM)) as { visible: (value: unknown) => string };

const RLO = "\u202E";
const ZWSP = "\u200B";
const LRI = "\u2066";

describe("format characters", () => {
  test("found and spelled out: bidi overrides and isolates, zero-width characters, BOM, soft hyphen", () => {
    expect(formatCharIn(`admin${RLO}gnp.exe`)).toBe("U+202E");
    expect(formatCharIn(`ad${ZWSP}min`)).toBe("U+200B");
    expect(formatCharIn("a\uFEFFb")).toBe("U+FEFF");
    expect(formatCharIn("a\u00ADb")).toBe("U+00AD");
    expect(formatCharIn("שלום עולם · 日本語 · émoji 🎉")).toBeNull();
    expect(spellOutFormatChars(`x${RLO}gnp.exe`)).toBe("x<U+202E>gnp.exe");
    // The dashboard's text nodes use the same rule.
    expect(visible(`x${RLO}gnp.exe${LRI}`)).toBe("x<U+202E>gnp.exe<U+2066>");
    expect(visible("plain <b>text</b>")).toBe("plain <b>text</b>");
  });
});

describe(`refused where a person reads them (${storesLabel})`, () => {
  let gw: TestGateway;
  let up: MockUpstream;
  let token: string;
  let accountId: string;
  let credId: string;

  beforeAll(async () => {
    up = await startMockOpenAI();
    gw = await startTestGateway({ PROVIDER_OPENAI_BASE_URL: up.url, SIGNUP_IP_LIMIT_PER_HOUR: "1000" });
    const acct = await createAccount(gw);
    token = acct.token;
    accountId = acct.id;
    credId = (await addCredential(gw, acct.id, "openai")).id;
  }, 60_000);
  afterAll(async () => {
    await gw?.stop();
    await up?.stop();
  }, 60_000);

  const cases: Array<[string, string, Record<string, unknown>, string]> = [
    ["routing-key label", "/v1/organizations/routing-keys", { label: `exe${RLO}gnp.admin` }, "`label`"],
    ["lane model id", "/v1/organizations/routing-keys", { label: "ok", providers: [{ provider: "openai", credential_id: "cred_x", model: `gpt-4o${ZWSP}` }] }, "`providers[0].model`"],
    ["lane category description", "/v1/organizations/routing-keys", { label: "ok", providers: [{ provider: "openai", credential_id: "cred_x", category_description: `code ${LRI}review` }] }, "`providers[0].category_description`"],
    ["credential label", "/v1/organizations/credentials", { provider: "openai", api_key: "sk-test-abcdefghijklmnop", label: `prod${ZWSP}` }, "`label`"],
    ["token label", "/v1/organizations/tokens", { scope: "read_only", label: `${RLO}ci` }, "`label`"],
  ];
  for (const [name, path, body, field] of cases) {
    test(`${name}: 400 bad_request naming ${field}`, async () => {
      const r = await gw.call(path, { token, body });
      expect(r.status).toBe(400);
      expect(r.body.code).toBe("bad_request");
      expect(r.body.error).toContain(field);
      expect(r.body.error).toMatch(/invisible or bidirectional formatting character \(U\+[0-9A-F]{4}\)/);
    });
  }

  test("right-to-left and other scripts without format characters are accepted", async () => {
    const r = await gw.call("/v1/organizations/routing-keys", { token, body: { label: "מפתח ראשי · 主键" } });
    expect(r.status).toBe(200);
    expect(r.body.routing_key.label).toBe("מפתח ראשי · 主键");
  });

  test("signup `source` with U+202E: 400 naming the field, no code", async () => {
    const r = await signupCall(gw, "agent-signup", { email: randomEmail(), source: `readme${RLO}` });
    expect(r.status).toBe(400);
    expect(r.body.error).toContain("`source`");
    expect(r.body.code).toBeUndefined();
  });

  test("a model id sent to inference is stored as sent (no refusal on the hot path)", async () => {
    const k = await addRoutingKey(gw, accountId, { lanes: [lane("openai", credId)] });
    const model = `gpt-4o-mini${RLO}nimda`;
    const res = await gw.req("/v1/chat/completions", { token: k.raw, body: chatBody({ model }) });
    expect(res.status).toBe(200);
    await res.text();
    await gw.ctx.services.usage.flush();
    const rows = await gw.ctx.db.select().from(usageRecords).where(eq(usageRecords.routingKeyId, k.id));
    expect(rows.map((r) => r.model)).toContain(model);
    expect(visible(model)).toBe("gpt-4o-mini<U+202E>nimda");
  });
});
