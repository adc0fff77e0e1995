// The one body reader (src/http/body.ts) on every route: MAX_REQUEST_BYTES stops a body (declared
// or chunked) with 413 while the client is still sending, and JSON nested deeper than
// MAX_JSON_DEPTH is a 400 in the route's own error shape, found by a linear scan before any parse.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { connect } from "node:net";
import { MAX_JSON_DEPTH, nestsDeeperThan } from "../../src/http/body.ts";
import { createAccount, startTestGateway, storesLabel, type TestGateway } from "../helpers/gateway.ts";
import { startMockOpenAI, type MockUpstream } from "../mocks/openai-upstream.ts";
import { addCredential, addRoutingKey, chatBody, lane } from "../relay/fixtures.ts";

const CAP = 64 * 1024;
let gw: TestGateway;
let up: MockUpstream;
let account: { id: string; token: string };
let rawKey: string;

beforeAll(async () => {
  up = await startMockOpenAI();
  gw = await startTestGateway({ MAX_REQUEST_BYTES: String(CAP), PROVIDER_OPENAI_BASE_URL: up.url, BILLING_WEBHOOK_SECRET: "whsec_test_body_limits" });
  account = await createAccount(gw);
  const cred = await addCredential(gw, account.id, "openai");
  rawKey = (await addRoutingKey(gw, account.id, { lanes: [lane("openai", cred.id)] })).raw;
}, 60_000);
afterAll(async () => {
  await gw?.stop();
  await up?.stop();
}, 60_000);

/** `{"a":{"a":…1…}}` with `levels` objects. */
const nested = (levels: number, leaf = "1") => '{"a":'.repeat(levels) + leaf + "}".repeat(levels);

interface RouteCase {
  name: string;
  path: string;
  headers: () => Record<string, string>;
  /** A body whose JSON nests `levels` deep in a field the route carries along or rejects later. */
  body: (levels: number) => string;
  /** Checks the 400's shape. */
  shape: (body: any) => void;
}

const nestedShape = (b: any) => {
  expect(b.error.type).toBe("invalid_request_error");
  expect(b.error.code).toBeNull();
  expect(b.error.message).toContain(`deeper than ${MAX_JSON_DEPTH} levels`);
};
const flatShape = (code: string | undefined) => (b: any) => {
  expect(b.error).toContain(`deeper than ${MAX_JSON_DEPTH} levels`);
  expect(b.code).toBe(code);
};
const inference = (path: string): RouteCase => ({
  name: path, path,
  headers: () => ({ authorization: `Bearer ${rawKey}` }),
  body: (levels) => `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"input":"hi","max_tokens":5,"metadata":${nested(levels - 1)}}`,
  shape: nestedShape,
});

const ROUTES: RouteCase[] = [
  inference("/v1/chat/completions"),
  inference("/v1/responses"),
  inference("/v1/embeddings"),
  { ...inference("/v1/messages"), shape: (b) => { expect(b.type).toBe("error"); expect(b.error.type).toBe("invalid_request_error"); expect(b.error.message).toContain("deeper than"); } },
  { ...inference("/v1/messages/count_tokens"), shape: (b) => { expect(b.type).toBe("error"); expect(b.error.message).toContain("deeper than"); } },
  { name: "/blitz", path: "/blitz", headers: () => ({ authorization: `Bearer ${rawKey}` }), body: (l) => `{"prompts":["hi"],"x":${nested(l - 1)}}`, shape: flatShape("bad_request") },
  { name: "management POST", path: "/v1/organizations/routing-keys", headers: () => ({ authorization: `Bearer ${account.token}` }), body: (l) => `{"label":${nested(l - 1)}}`, shape: flatShape("bad_request") },
  { name: "agent-verify (no account)", path: "/api/auth?action=agent-verify", headers: () => ({}), body: (l) => `{"email":"a@example.com","code":${nested(l - 1)}}`, shape: flatShape(undefined) },
  { name: "billing webhook", path: "/api/billing/webhook", headers: () => ({ "stripe-signature": "t=1,v1=00" }), body: (l) => `{"id":"evt_1","data":${nested(l - 1)}}`, shape: (b) => { expect(b.error).toContain(`deeper than ${MAX_JSON_DEPTH} levels`); expect(b.code).toBe("bad_request"); } },
];

const post = (r: RouteCase, body: string, extra: Record<string, string> = {}) =>
  fetch(gw.url + r.path, { method: "POST", headers: { "content-type": "application/json", ...r.headers(), ...extra }, body });

describe("nesting scan (linear, never recursive)", () => {
  test("counts objects and arrays outside strings only", () => {
    expect(nestsDeeperThan(nested(64), 64)).toBe(false);
    expect(nestsDeeperThan(nested(65), 64)).toBe(true);
    expect(nestsDeeperThan("[".repeat(65) + "]".repeat(65), 64)).toBe(true);
    // Brackets inside strings, escaped quotes and backslash runs do not count.
    expect(nestsDeeperThan(`{"a":"${"[".repeat(500)}"}`, 64)).toBe(false);
    expect(nestsDeeperThan(`{"a":"\\"${"{".repeat(100)}"}`, 64)).toBe(false);
    expect(nestsDeeperThan(`{"a":"x\\\\", "b":${"[".repeat(70)}`, 64)).toBe(true);
    // Siblings do not add up: depth, not count.
    expect(nestsDeeperThan(`[${Array.from({ length: 1000 }, () => "[[1]]").join(",")}]`, 64)).toBe(false);
    // Unterminated or unbalanced text is left to JSON.parse.
    expect(nestsDeeperThan(`{"a":"${"[".repeat(100)}`, 64)).toBe(false);
  });

  test("5 million levels are judged without recursion (no stack overflow)", () => {
    expect(nestsDeeperThan("[".repeat(5_000_000), 64)).toBe(true);
    expect(nestsDeeperThan(`"${"\\\\".repeat(1_000_000)}"`, 64)).toBe(false);
  });
});

describe(`JSON nesting limit on every route (${storesLabel})`, () => {
  for (const r of ROUTES) {
    test(`${r.name}: ${MAX_JSON_DEPTH + 1} levels answer 400 in the route's error shape; ${MAX_JSON_DEPTH} levels pass the reader`, async () => {
      const deep = await post(r, r.body(MAX_JSON_DEPTH + 1));
      expect(deep.status).toBe(400);
      r.shape(await deep.json());
      const ok = await post(r, r.body(MAX_JSON_DEPTH));
      const text = await ok.text();
      // Whatever the route says next (a schema 400, an upstream answer), it is not the nesting refusal.
      expect(text).not.toContain("deeper than");
      expect(ok.status).not.toBe(413);
    });
  }

  test("a body of nothing but 60,000 opening brackets answers 400 on chat and on agent-verify (no account), never a 5xx", async () => {
    for (const path of ["/v1/chat/completions", "/api/auth?action=agent-verify"]) {
      const res = await fetch(gw.url + path, { method: "POST", headers: { authorization: `Bearer ${rawKey}` }, body: "[".repeat(60_000) });
      expect(res.status).toBe(400);
      expect(await res.text()).toContain("deeper than");
    }
  });
});

/**
 * Sends `path` a chunked body of `chunks` × `chunkBytes` without ever sending the terminating
 * chunk, and resolves with the status line once the gateway answers. `sent`: bytes sent until then.
 */
function chunkedUntilAnswer(path: string, headers: Record<string, string>, chunkBytes: number, chunks: number): Promise<{ status: number; sent: number; finished: boolean }> {
  const u = new URL(gw.url);
  return new Promise((resolve, reject) => {
    const sock = connect(Number(u.port), u.hostname);
    let sent = 0;
    let i = 0;
    let answered = false;
    let got = "";
    const chunk = "[" + "1,".repeat(Math.floor((chunkBytes - 2) / 2)) + "1]";
    const head = [`POST ${path} HTTP/1.1`, `host: ${u.host}`, "content-type: application/json", "transfer-encoding: chunked",
      ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`), "", ""].join("\r\n");
    sock.on("error", (e) => { if (!answered) reject(e); });
    sock.on("data", (d) => {
      got += d.toString("latin1");
      const m = /^HTTP\/1\.1 (\d{3})/.exec(got);
      if (m && !answered) {
        answered = true;
        resolve({ status: Number(m[1]), sent, finished: i >= chunks });
        sock.destroy();
      }
    });
    sock.on("close", () => { if (!answered) reject(new Error(`closed without an answer after ${sent} bytes`)); });
    sock.write(head);
    const tick = () => {
      if (answered || sock.destroyed) return;
      if (i >= chunks) return; // never send the terminator: the body is still "being sent"
      i++;
      sock.write(`${chunk.length.toString(16)}\r\n${chunk}\r\n`);
      sent += chunk.length;
      setTimeout(tick, 2);
    };
    tick();
  });
}

describe(`MAX_REQUEST_BYTES while the client is still sending (${storesLabel})`, () => {
  const cases: Array<[string, string, () => Record<string, string>]> = [
    ["agent-verify (no account)", "/api/auth?action=agent-verify", () => ({})],
    ["chat completions", "/v1/chat/completions", () => ({ authorization: `Bearer ${rawKey}` })],
    ["management POST", "/v1/organizations/routing-keys", () => ({ authorization: `Bearer ${account.token}` })],
    ["billing webhook", "/api/billing/webhook", () => ({ "stripe-signature": "t=1,v1=00" })],
    ["/blitz", "/blitz", () => ({ authorization: `Bearer ${rawKey}` })],
  ];
  for (const [name, path, headers] of cases) {
    test(`${name}: a chunked body passing the cap gets 413 before it ends`, async () => {
      // 64 chunks of 8 KB = 8× the cap, never terminated.
      const r = await chunkedUntilAnswer(path, headers(), 8 * 1024, 64);
      expect(r.status).toBe(413);
      expect(r.finished).toBe(false);
      expect(r.sent).toBeGreaterThan(CAP);
    }, 20_000);
  }

  test("a declared Content-Length over the cap is 413 before a byte of the body is read", async () => {
    const r = await chunkedUntilAnswerDeclared("/api/auth?action=agent-verify", CAP + 1);
    expect(r).toBe(413);
  });

  test("a body at the cap is read whole (multi-byte UTF-8 split across chunks decodes intact)", async () => {
    const text = "é".repeat(1000);
    const body = JSON.stringify(chatBody({ messages: [{ role: "user", content: text }] }));
    const enc = new TextEncoder().encode(body);
    // Split inside a two-byte character on purpose.
    const stream = new ReadableStream<Uint8Array>({
      start(c) {
        c.enqueue(enc.slice(0, 101));
        c.enqueue(enc.slice(101));
        c.close();
      },
    });
    const res = await fetch(`${gw.url}/v1/chat/completions`, { method: "POST", headers: { authorization: `Bearer ${rawKey}`, "content-type": "application/json" }, body: stream });
    expect(res.status).toBe(200);
    expect(up.received.at(-1)!.body.messages[0].content).toBe(text);
  });
});

/** A request that declares `length` bytes and sends none: the answer must not wait for them. */
function chunkedUntilAnswerDeclared(path: string, length: number): Promise<number> {
  const u = new URL(gw.url);
  return new Promise((resolve, reject) => {
    const sock = connect(Number(u.port), u.hostname);
    let got = "";
    sock.on("error", reject);
    sock.on("data", (d) => {
      got += d.toString("latin1");
      const m = /^HTTP\/1\.1 (\d{3})/.exec(got);
      if (m) { resolve(Number(m[1])); sock.destroy(); }
    });
    sock.write(`POST ${path} HTTP/1.1\r\nhost: ${u.host}\r\ncontent-type: application/json\r\ncontent-length: ${length}\r\n\r\n`);
  });
}

describe(`encodings (${storesLabel})`, () => {
  test("a leading UTF-8 BOM is dropped and invalid bytes read as U+FFFD, the same with a length or chunked", async () => {
    const json = new TextEncoder().encode(JSON.stringify(chatBody({ messages: [{ role: "user", content: "hi \uFFFD" }] })));
    const body = new Uint8Array([0xef, 0xbb, 0xbf, ...json]);
    // The U+FFFD above, sent as an invalid byte instead.
    const i = body.indexOf(0xef, 3);
    const broken = new Uint8Array([...body.slice(0, i), 0xff, ...body.slice(i + 3)]);
    for (const chunked of [false, true]) {
      const payload = chunked ? new ReadableStream<Uint8Array>({ start(c) { c.enqueue(broken.slice(0, 2)); c.enqueue(broken.slice(2)); c.close(); } }) : broken;
      const res = await fetch(`${gw.url}/v1/chat/completions`, { method: "POST", headers: { authorization: `Bearer ${rawKey}`, "content-type": "application/json" }, body: payload });
      expect(res.status).toBe(200);
      await res.text();
      expect(up.received.at(-1)!.body.messages[0].content).toBe("hi \uFFFD");
    }
  });
});
