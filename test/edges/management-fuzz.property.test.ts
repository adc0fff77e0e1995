// Property: no management input answers 5xx (CONTRACT §8 "never a 5xx"; SPEC Errors). Generated
// strings (NUL, lone surrogates, huge, unicode), ids, query strings and bodies (random JSON and
// bodies with each route's real field names holding random values) go to every management route
// with every method; each answer is a success or a 4xx in the documented flat shape
// `{error: string, code?: string, …}`. Runs once per store mode with a bounded number of cases.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import fc from "fast-check";
import { createAccount, startTestGateway, storesLabel, type TestGateway } from "../helpers/gateway.ts";

let gw: TestGateway;
let token: string;
beforeAll(async () => {
  // A sign-in that happens to validate is provisioned against a closed port (fails fast, no network).
  gw = await startTestGateway({ SUB_API_BASE_URL: "http://127.0.0.1:9", SUB_AUTH_BASE_URL: "http://127.0.0.1:9", BRIDGE_HEALTH_INTERVAL_SECONDS: "3600" });
  ({ token } = await createAccount(gw));
}, 60_000);
afterAll(async () => { await gw?.stop(); }, 60_000);

const ROUTES: Record<string, { methods: string[]; fields: string[]; query: string[] }> = {
  "/v1/organizations/me": { methods: ["GET"], fields: [], query: [] },
  "/v1/organizations/tokens": { methods: ["GET", "POST", "DELETE"], fields: ["scope", "label"], query: ["id"] },
  "/v1/organizations/routing-keys": {
    methods: ["GET", "POST", "PATCH"],
    fields: ["label", "mode", "monthly_budget_usd", "budget_excludes_seats", "revoked", "regenerate", "classifier_provider", "classifier_model", "classifier_instructions", "classifier_credential_id", "providers"],
    query: ["id", "include"],
  },
  "/v1/organizations/credentials": { methods: ["GET", "POST", "DELETE"], fields: ["provider", "api_key", "label"], query: ["id"] },
  "/v1/organizations/bridges": { methods: ["GET", "POST", "DELETE"], fields: ["base_url", "token", "label", "cloud_provider", "cloud_instance_id", "region", "plan_tier", "status"], query: ["id"] },
  "/v1/organizations/sub-session": { methods: ["GET", "POST", "DELETE"], fields: ["auth_json", "source_path", "ttl_seconds"], query: [] },
  "/v1/organizations/usage": { methods: ["GET"], fields: [], query: ["key_id", "days"] },
  "/v1/routing-keys": { methods: ["GET", "POST", "PATCH"], fields: ["label", "providers", "monthly_budget_usd"], query: ["id"] },
  "/v1/bridges": { methods: ["GET", "POST", "DELETE"], fields: ["base_url", "token", "label"], query: ["id"] },
  "/api/sub": { methods: ["GET", "POST", "DELETE"], fields: ["auth_json", "source_path"], query: ["action"] },
};

const LANE_FIELDS = ["provider", "model", "credential_id", "sub_session_id", "bridge_instance_id", "category_key", "category_description", "fallback_to_default_model", "reasoning_effort", "verbosity", "service_tier"];

// Strings that have broken stores and parsers: NUL, lone surrogates, control characters, long text.
const nasty = fc.oneof(
  fc.string({ unit: "binary", maxLength: 40 }),
  fc.string({ maxLength: 20 }).map((s) => `${s}\u0000${s}`),
  fc.constantFrom("\uD800", "a\uDFFFb", "\u0000", "%00", "' or 1=1 --", "../../etc/passwd", "\r\nX-Injected: 1", "openai", "anthropic", "sub", "bridge", "read_only", "read_write", "fallback", "classifier", "lanes", "status", "connect", "disconnect", "https://example.com", "http://[::1]", "x".repeat(9000)),
);
const scalar = fc.oneof(nasty, fc.integer(), fc.double(), fc.boolean(), fc.constant(null), fc.constant(1e308), fc.constant(-1));
const anyJson = fc.jsonValue({ maxDepth: 3 });
const value = fc.oneof(scalar, anyJson, fc.array(scalar, { maxLength: 3 }));
const lane = fc.dictionary(fc.constantFrom(...LANE_FIELDS), value, { maxKeys: 5 });
const authJson = fc.record({
  tokens: fc.oneof(fc.dictionary(fc.constantFrom("access_token", "refresh_token", "id_token", "account_id"), fc.oneof(nasty, scalar), { maxKeys: 4 }), value),
  last_refresh: fc.oneof(nasty, scalar),
}, { requiredKeys: [] });

function bodyFor(fields: string[]) {
  const fieldValue = (f: string) => f === "providers" ? fc.oneof(fc.array(lane, { maxLength: 6 }), value)
    : f === "auth_json" ? fc.oneof(authJson, authJson.map((a) => JSON.stringify(a)), value)
    : value;
  const known = fields.length
    ? fc.tuple(...fields.map((f) => fc.option(fieldValue(f), { nil: undefined }))).map((vals) => Object.fromEntries(fields.map((f, i) => [f, vals[i]]).filter(([, v]) => v !== undefined)))
    : fc.constant({});
  return fc.oneof(
    { weight: 3, arbitrary: known.map((b) => JSON.stringify(b)) },
    { weight: 1, arbitrary: anyJson.map((b) => JSON.stringify(b)) },
    { weight: 1, arbitrary: fc.string({ unit: "binary", maxLength: 60 }) },
  );
}

/** Percent-encodes; a lone surrogate (not encodable) becomes the invalid UTF-8 bytes of one. */
function enc(x: string): string {
  try {
    return encodeURIComponent(x);
  } catch {
    return `%ED%A0%80${encodeURIComponent(x.replace(/[\uD800-\uDFFF]/g, ""))}`;
  }
}

function queryFor(params: string[]) {
  const v = fc.oneof(nasty, fc.constantFrom("lanes", "status", "connect", "disconnect", "rkey_x", "tok_x", "%00", "%FF%FE", "%"), fc.integer().map(String));
  return fc.array(fc.tuple(fc.constantFrom(...params, "unknown"), v), { maxLength: 3 })
    .map((pairs) => pairs.length ? `?${pairs.map(([k, x]) => `${k}=${enc(x)}`).join("&")}` : "");
}

/** The documented management error shape: `{error: string, code?: string}` plus extras (402's payment). */
function documentedShape(status: number, text: string) {
  if (status < 400) return true;
  const body = JSON.parse(text);
  return typeof body.error === "string" && body.error.length > 0 && (body.code === undefined || typeof body.code === "string");
}

/** Bun's limit on the request line and headers together. */
const HEAD_LIMIT = 16 * 1024;

describe(`management routes under generated input (${storesLabel})`, () => {
  test("docs/behaviour.md: a request head up to 16 KiB reaches the route; a longer one gets the HTTP server's 431, no body, before any route", async () => {
    const get = (n: number) => fetch(`${gw.url}/v1/organizations/routing-keys?id=${"x".repeat(n)}`, { headers: { authorization: `Bearer ${token}` } });
    const reached = await get(HEAD_LIMIT - 1024);
    expect(reached.status).toBe(400);
    expect(((await reached.json()) as { code: string }).code).toBe("bad_request");
    const refused = await get(HEAD_LIMIT + 1024);
    expect(refused.status).toBe(431);
    expect(await refused.text()).toBe("");
  });

  for (const [path, spec] of Object.entries(ROUTES)) {
    test(`CONTRACT §8 (no management input answers 5xx): ${path} answers success or a documented 4xx`, async () => {
      await fc.assert(
        fc.asyncProperty(fc.constantFrom(...spec.methods), queryFor(spec.query.length ? spec.query : ["id"]), bodyFor(spec.fields), async (method, query, body) => {
          const res = await fetch(`${gw.url}${path}${query}`, {
            method,
            headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
            body: method === "GET" ? undefined : body,
          });
          const text = await res.text();
          // A request head over 16 KiB is the HTTP server's own 431, before any route (docs/behaviour.md).
          if (res.status === 431 && path.length + query.length > HEAD_LIMIT - 1024) return;
          if (res.status >= 500 || !documentedShape(res.status, text)) {
            throw new Error(`${method} ${path}${query} ${body.slice(0, 200)} → ${res.status} ${text.slice(0, 300)}`);
          }
        }),
        { numRuns: 40 },
      );
    }, 60_000);
  }

  test("CONTRACT §8: generated ids and tokens in the Authorization header never answer 5xx", async () => {
    await fc.assert(
      fc.asyncProperty(fc.oneof(fc.string({ maxLength: 60 }), fc.string({ maxLength: 20 }).map((s) => `sk_${s}`), fc.string({ maxLength: 20 }).map((s) => `rk_${s}`)), async (t) => {
        let header: string;
        try {
          header = `Bearer ${t}`;
          new Headers({ authorization: header });
        } catch {
          return; // not expressible as an HTTP header at all
        }
        const res = await fetch(`${gw.url}/v1/organizations/routing-keys`, { headers: { authorization: header } });
        const text = await res.text();
        expect(res.status).toBe(401);
        expect(documentedShape(res.status, text)).toBe(true);
      }),
      { numRuns: 40 },
    );
  });
});
