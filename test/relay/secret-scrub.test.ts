// Upstream error text never carries the lane's secret (README "Secrets"): every substring of 8 or
// more characters of it, plain or in a known encoding (URL, JSON escape, hex, base64 at any
// alignment), is redacted before the text reaches a client, a log line or a usage record.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import fc from "fast-check";
import { eq } from "drizzle-orm";
import { MIN_FRAGMENT, scrubSecrets, secretsOfCall } from "../../src/relay/secret-scrub.ts";
import { usageRecords } from "../../src/store/db/schema/index.ts";
import { createAccount, startTestGateway, storesLabel, type TestGateway } from "../helpers/gateway.ts";
import { startMockOpenAI, type MockUpstream } from "../mocks/openai-upstream.ts";
import { addCredential, addRoutingKey, chatBody, lane } from "./fixtures.ts";

const KEY = "Zq7xKp2mWv9tLr4sNb6yHc3dFg8jUe5aQw1o"; // 36 characters, no vendor prefix

describe("scrubSecrets", () => {
  test("30 of a key's 36 characters echoed in an upstream message are redacted; the text around stays", () => {
    const out = scrubSecrets(`Incorrect API key provided: ${KEY.slice(3, 33)}. See https://example.com.`, [KEY]);
    expect(out).toBe("Incorrect API key provided: [redacted]. See https://example.com.");
  });

  test("every substring of at least 8 characters is redacted, anywhere in any text (property)", () => {
    fc.assert(fc.property(
      fc.nat({ max: KEY.length - MIN_FRAGMENT }), fc.nat({ max: KEY.length }), fc.string({ maxLength: 40 }), fc.string({ maxLength: 40 }),
      (start, extra, before, after) => {
        const frag = KEY.slice(start, Math.min(KEY.length, start + MIN_FRAGMENT + extra));
        const out = scrubSecrets(before + frag + after, [KEY]);
        expect(out).toContain("[redacted]");
        // No run of 8 characters of the key survives.
        for (let i = 0; i + MIN_FRAGMENT <= KEY.length; i++) expect(out).not.toContain(KEY.slice(i, i + MIN_FRAGMENT));
      },
    ), { numRuns: 300 });
  });

  test("the scrub never shortens text it did not redact, and scans text of any size whole", () => {
    const clean = `{"type":"response.completed","response":{"error":null,"output":"${"word ".repeat(1024 * 1024)}"}}`;
    expect(scrubSecrets(clean, [KEY])).toBe(clean);
    // A fragment 3 MB in, far past any old scan limit, is still found; the rest stays as it was.
    const leak = `${clean.slice(0, 3_000_000)}${KEY.slice(4, 20)}${clean.slice(3_000_000)}`;
    const out = scrubSecrets(leak, [KEY]);
    expect(out).toBe(`${clean.slice(0, 3_000_000)}[redacted]${clean.slice(3_000_000)}`);
  });

  test("shorter fragments and unrelated text stay as they are", () => {
    const text = `model gpt-4o-mini not found; key ends ${KEY.slice(-7)}; request req_1234567`;
    expect(scrubSecrets(text, [KEY])).toBe(text);
  });

  test("the key's known encodings are redacted: base64 (whole and fragments at each alignment), base64url, URL, hex", () => {
    const secret = "s3cr3t/key+with=odd&chars_0123456789";
    const b64 = (s: string) => Buffer.from(s).toString("base64");
    const forms = [
      b64(secret), Buffer.from(secret).toString("base64url"), encodeURIComponent(secret), encodeURIComponent(secret).toLowerCase(),
      Buffer.from(secret).toString("hex"), b64(secret.slice(1, 25)), b64(secret.slice(2, 30)), b64(secret.slice(5, 20)),
      JSON.stringify(`Bearer ${secret}`).slice(1, -1),
    ];
    for (const f of forms) {
      const out = scrubSecrets(`echo: ${f} end`, [secret]);
      expect(out).toStartWith("echo: ");
      expect(out).toContain("[redacted]");
      expect(out.length).toBeLessThan(`echo: ${f} end`.length);
    }
  });

  test("a long text is scanned once per character (16 KB against a 2 KB token answers at once)", () => {
    const jwt = "eyJ" + "a1b2c3d4e5".repeat(200);
    const text = ("lorem ipsum dolor ".repeat(900) + jwt.slice(100, 400)).slice(-16000);
    const out = scrubSecrets(text, [jwt]);
    expect(out).not.toContain(jwt.slice(200, 208));
    expect(out).toEndWith("[redacted]");
  });

  test("the secrets of a call: credential headers without their scheme, and a key in the query", () => {
    expect(secretsOfCall({ url: "https://x.test/v1/m?key=AIzaQUERYKEY123&alt=sse", headers: { authorization: "Bearer tok-123456789", "x-api-key": "ant-abcdefgh", "content-type": "application/json", accept: "text/event-stream" }, body: "" }).sort())
      .toEqual(["AIzaQUERYKEY123", "ant-abcdefgh", "tok-123456789"]);
  });
});

describe(`an upstream echoing the lane's key (${storesLabel})`, () => {
  let gw: TestGateway;
  let up: MockUpstream;
  let rawKey: string;
  let keyId: string;

  beforeAll(async () => {
    up = await startMockOpenAI();
    gw = await startTestGateway({ PROVIDER_OPENAI_BASE_URL: up.url });
    const acct = await createAccount(gw);
    const cred = await addCredential(gw, acct.id, "openai", KEY);
    const k = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", cred.id)] });
    rawKey = k.raw;
    keyId = k.id;
  }, 60_000);
  afterAll(async () => {
    await gw?.stop();
    await up?.stop();
  }, 60_000);

  const fragment = KEY.slice(3, 33);
  const b64 = Buffer.from(KEY).toString("base64");

  for (const [status, expected] of [[401, 502], [400, 400], [500, 502]] as const) {
    test(`HTTP ${status} with 30 of the key's characters (and its base64) in message and code: neither the client, the logs nor the usage record see them`, async () => {
      gw.logs.length = 0;
      const res = await gw.req("/v1/chat/completions", {
        token: rawKey,
        body: chatBody({ mock: { status, error: { message: `Incorrect API key provided: ${fragment} (${b64})`, type: "invalid_request_error", code: `bad_key_${fragment}` } } }),
      });
      expect(res.status).toBe(expected);
      const text = await res.text();
      // A refused key (401) is reported in the gateway's own words, without the upstream's text.
      if (status !== 401) expect(text).toContain("[redacted]");
      for (const s of [fragment, fragment.slice(0, 8), fragment.slice(-8), b64.slice(4, 12)]) {
        expect(text).not.toContain(s);
        expect(gw.logs.join("")).not.toContain(s);
      }
      await gw.ctx.services.usage.flush();
      const rows = await gw.ctx.db.select().from(usageRecords).where(eq(usageRecords.routingKeyId, keyId));
      for (const r of rows) expect(JSON.stringify(r)).not.toContain(fragment.slice(0, 8));
    });
  }
});

describe(`count_tokens: an Anthropic upstream echoing the lane's key (${storesLabel})`, () => {
  test("the 400 passed back carries no fragment of the x-api-key it was sent", async () => {
    const echo = Bun.serve({
      port: 0, hostname: "127.0.0.1",
      async fetch(req) {
        await req.text();
        const key = req.headers.get("x-api-key") ?? "";
        return Response.json({ type: "error", error: { type: "invalid_request_error", message: `invalid x-api-key ${key.slice(2, 32)} for this organization` } }, { status: 400 });
      },
    });
    const g = await startTestGateway({ PROVIDER_ANTHROPIC_BASE_URL: `http://127.0.0.1:${echo.port}` });
    try {
      const acct = await createAccount(g);
      const cred = await addCredential(g, acct.id, "anthropic", KEY);
      const k = await addRoutingKey(g, acct.id, { lanes: [lane("anthropic", cred.id)] });
      const res = await g.req("/v1/messages/count_tokens", { token: k.raw, body: { model: "claude-sonnet-4-5", messages: [{ role: "user", content: "hi" }] } });
      expect(res.status).toBe(400);
      const text = await res.text();
      expect(text).toContain("invalid x-api-key [redacted] for this organization");
      expect(text).not.toContain(KEY.slice(2, 10));
    } finally {
      await g.stop();
      echo.stop(true);
    }
  }, 60_000);
});
