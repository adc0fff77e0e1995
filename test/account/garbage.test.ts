// Garbage in, a documented error out: malformed bodies, headers and queries thrown at every
// endpoint of the account side never produce a 500 `unhandled` (or any 5xx).
import { afterAll, beforeAll, beforeEach, describe, expect, test } from "bun:test";
import { connect } from "node:net";
import { startTestGateway, storesLabel, type TestGateway } from "../helpers/gateway.ts";
import { postWebhook, proAccountViaApi, randomEmail, signedEvent, signupViaApi } from "../helpers/signup.ts";

const MAX = 65536;

const BODIES: Array<string | Uint8Array> = [
  "", " ", "{", "}", "{]", "null", "true", "0", "1e309", "\"a string\"", "[]", "[{}]", "[\"email\"]",
  "{\"email\": {}}", "{\"email\": []}", "{\"email\": null}", "{\"email\": true}", "{\"email\": 1}", "{\"email\": \"\\u0000@example.com\"}",
  "{\"email\": \"a@example.com\", \"code\": {}}", "{\"email\": \"a@example.com\", \"code\": [1,2,3,4,5,6]}", "{\"email\": \"a@example.com\", \"code\": 1.5}",
  "{\"email\": \"a@example.com\", \"source\": {\"x\": 1}}", "{\"email\": \"a@example.com\", \"source\": \"\\n\\r\"}",
  "{\"__proto__\": {\"polluted\": 1}, \"email\": \"proto@example.com\"}", "{\"constructor\": {\"prototype\": {\"x\": 1}}}",
  "{\"scope\": null}", "{\"scope\": {}}", "{\"scope\": \"read_only\", \"label\": null}", "{\"scope\": \"read_only\", \"label\": \"\"}",
  "{\"scope\": \"read_only\", \"label\": \"" + "é".repeat(100) + "\"}", "{\"scope\": \"read_only\", \"label\": \"\\ud800\"}",
  "[".repeat(20000) + "]".repeat(20000),
  "{\"a\":".repeat(5000) + "1" + "}".repeat(5000),
  JSON.stringify({ email: `${"x".repeat(40000)}@example.com` }),
  JSON.stringify({ email: randomEmail(), source: "s".repeat(20000) }),
  "\uFEFF{\"email\": \"bom@example.com\"}",
  new Uint8Array([0xff, 0xfe, 0x7b, 0x22, 0x80, 0x22, 0x7d]),
  new Uint8Array([0x7b, 0x22, 0x65, 0x22, 0x3a, 0x22, 0xc3, 0x28, 0x22, 0x7d]),
  "x".repeat(MAX + 10),
  "email=form%40example.com",
];

const CONTENT_TYPES = ["application/json", "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "application/json; charset=latin1"];

const QUERY_SUFFIXES = [
  "", "?", "?&&&", "?=", "?=x", "?%ZZ=1", "?x=%ZZ", "?%E0%A4%A=1", "?x=%00", `?x=${"q".repeat(8000)}`, "?x=1&x=2", "?id[]=1", "?id=%00", "?id=tok_%00x", "?id=" + "t".repeat(300), "?id=%27%20OR%201%3D1%20--",
];

describe(`garbage never yields a 5xx (${storesLabel})`, () => {
  let gw: TestGateway;
  let pro: { token: string };
  let free: { token: string };
  beforeAll(async () => {
    gw = await startTestGateway({ MAX_REQUEST_BYTES: String(MAX), SIGNUP_IP_LIMIT_PER_HOUR: "1000000", BILLING_WEBHOOK_SECRET: "whsec_garbage_tests" });
    pro = await proAccountViaApi(gw);
    free = await signupViaApi(gw);
  }, 60_000);
  afterAll(async () => { await gw?.stop(); }, 60_000);

  let failures: string[] = [];
  beforeEach(() => { failures = []; }, 60_000);
  async function probe(method: string, path: string, init: { body?: string | Uint8Array; headers?: Record<string, string> } = {}) {
    let status = 0;
    let text = "";
    try {
      const r = await fetch(gw.url + path, { method, body: init.body, headers: init.headers });
      status = r.status;
      text = await r.text();
    } catch (e) {
      failures.push(`${method} ${path.slice(0, 80)}: request failed (${e})`);
      return;
    }
    if (status >= 500) failures.push(`${method} ${path.slice(0, 80)} ${JSON.stringify(init.headers ?? {}).slice(0, 120)} body=${String(init.body).slice(0, 60)} → ${status} ${text.slice(0, 200)}`);
    else if (status >= 400 && !path.startsWith("/checkout")) {
      // Every error is one of the documented JSON shapes.
      let body: any;
      try { body = JSON.parse(text); } catch { failures.push(`${method} ${path.slice(0, 80)} → ${status} not JSON: ${text.slice(0, 100)}`); return; }
      if (typeof body?.error !== "string") failures.push(`${method} ${path.slice(0, 80)} → ${status} without a flat error sentence: ${text.slice(0, 100)}`);
    }
  }

  const JSON_POSTS = (): Array<[string, Record<string, string>]> => [
    ["/api/auth?action=agent-signup", { "x-forwarded-for": "10.9.9.9" }],
    ["/api/auth?action=agent-verify", {}],
    ["/v1/organizations/tokens", { authorization: `Bearer ${pro.token}` }],
    ["/v1/organizations/tokens", { authorization: `Bearer ${free.token}` }],
    ["/api/billing/webhook", { "stripe-signature": `t=${Math.floor(Date.now() / 1000)},v1=${"0".repeat(64)}` }],
  ];

  test("malformed bodies with every content type", async () => {
    for (const [path, headers] of JSON_POSTS()) {
      for (const body of BODIES) {
        for (const ct of CONTENT_TYPES) await probe("POST", path, { body, headers: { ...headers, "content-type": ct } });
      }
      await probe("POST", path, { headers });
    }
    expect(failures).toEqual([]);
  }, 120_000);

  test("malformed query strings on every path and method", async () => {
    const targets: Array<[string, string, Record<string, string>]> = [
      ["POST", "/api/auth", {}],
      ["POST", "/api/billing/webhook", {}],
      ["GET", "/checkout", {}],
      ["GET", "/v1/organizations/me", { authorization: pro.token }],
      ["GET", "/v1/organizations/tokens", { authorization: pro.token }],
      ["POST", "/v1/organizations/tokens", { authorization: pro.token }],
      ["DELETE", "/v1/organizations/tokens", { authorization: pro.token }],
    ];
    for (const [method, path, headers] of targets) {
      for (const q of [...QUERY_SUFFIXES, "?action=agent-signup%00", "?action[]=agent-signup", "?action=AGENT-SIGNUP", "?account=%00", "?account=" + "a".repeat(5000)]) {
        await probe(method, path + q, { headers: { ...headers, "content-type": "application/json" }, body: method === "GET" ? undefined : "{\"email\":\"q@example.com\",\"scope\":\"read_only\"}" });
      }
    }
    expect(failures).toEqual([]);
  }, 120_000);

  test("malformed headers: authorization, x-forwarded-for, stripe-signature", async () => {
    const auths = ["Bearer", "Bearer ", "Basic dXNlcjpwYXNz", "sk_", "rk_", "gw_", "sk_" + "x".repeat(10000), "Bearer sk_\u00e9\u00e8", "Bearer Bearer sk_x", "Token abc", ",", "sk_ sk_"];
    for (const a of auths) {
      for (const [method, path] of [["GET", "/v1/organizations/me"], ["GET", "/v1/organizations/tokens"], ["POST", "/v1/organizations/tokens"], ["DELETE", "/v1/organizations/tokens?id=x"]] as const) {
        await probe(method, path, { headers: { authorization: a, "content-type": "application/json" }, body: method === "POST" ? "{}" : undefined });
      }
    }
    for (const xff of ["garbage", ",,,", " , ", "1.1.1.1, ", "::1", "[::1]:80", "999.999.999.999", "x".repeat(6000), "\u00ff\u00fe"]) {
      await probe("POST", "/api/auth?action=agent-signup", { headers: { "x-forwarded-for": xff, "content-type": "application/json" }, body: JSON.stringify({ email: randomEmail() }) });
    }
    const now = Math.floor(Date.now() / 1000);
    for (const sig of ["t=abc,v1=zz", `t=99999999999999999999,v1=${"0".repeat(64)}`, "v1=abc", "t=1,v1=", ",,,,", `t=${now},v0=abc`, `t=${now}`, `t=${now},v1=${"g".repeat(64)}`, "t=-5,v1=00", "x".repeat(9000), `t=${now},v1=${"0".repeat(64)},v1=${"1".repeat(64)}`]) {
      await probe("POST", "/api/billing/webhook", { headers: { "stripe-signature": sig, "content-type": "application/json" }, body: "{\"id\":\"evt_x\",\"type\":\"checkout.session.completed\"}" });
    }
    expect(failures).toEqual([]);
  }, 120_000);

  test("correctly signed events with hostile fields", async () => {
    const events: unknown[] = [
      { id: "evt_\u0000", type: "checkout.session.completed" },
      { id: "evt_nul_ref", type: "checkout.session.completed", data: { object: { client_reference_id: "acct_\u0000x" } } },
      { id: "evt_nul_type", type: "checkout.\u0000session.completed", data: { object: { client_reference_id: "acct_x" } } },
      { id: "evt_arr_obj", type: "checkout.session.completed", data: { object: [] } },
      { id: "evt_null_data", type: "checkout.session.completed", data: null },
      { id: "evt_num_ref", type: "checkout.session.completed", data: { object: { client_reference_id: 42, metadata: "x" } } },
      { id: "evt_long_ref", type: "checkout.session.completed", data: { object: { client_reference_id: "a".repeat(5000) } } },
      { id: "e".repeat(300), type: "checkout.session.completed" },
      { id: "evt_type_obj", type: { x: 1 } },
    ];
    for (const e of events) {
      const { payload, header } = await signedEvent("whsec_garbage_tests", e as Record<string, unknown>);
      const r = await postWebhook(gw, payload, header);
      if (r.status >= 500) failures.push(`${payload.slice(0, 80)} → ${r.status} ${JSON.stringify(r.body)}`);
    }
    expect(failures).toEqual([]);
  });

  test("raw HTTP with lying or absurd Content-Length", async () => {
    const raw = (req: string) => new Promise<string>((resolve) => {
      const s = connect(gw.port, "127.0.0.1", () => s.write(req));
      let out = "";
      s.on("data", (d) => { out += d.toString(); if (out.includes("\r\n\r\n")) s.end(); });
      s.on("close", () => resolve(out));
      s.on("error", () => resolve(out));
      setTimeout(() => s.destroy(), 3000);
    });
    const lines: string[] = [];
    for (const [path, cl, body] of [
      ["/api/auth?action=agent-signup", "99999999999", "{}"],
      ["/api/auth?action=agent-verify", "-1", "{}"],
      ["/v1/organizations/tokens", "abc", "{}"],
      ["/api/billing/webhook", "99999999999", "{}"],
    ] as const) {
      const res = await raw(`POST ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${pro.token}\r\nContent-Type: application/json\r\nContent-Length: ${cl}\r\nConnection: close\r\n\r\n${body}`);
      lines.push(`${path} CL=${cl}: ${res.split("\r\n")[0]}`);
    }
    for (const l of lines) {
      expect(l).toMatch(/: HTTP\/1\.1 [1-4]\d\d/);
    }
  }, 60_000);

  test("no request was logged as an unexpected failure", () => {
    const crashes = gw.logs.filter((l) => l.includes("\"request failed\""));
    expect(crashes).toEqual([]);
  });
});
