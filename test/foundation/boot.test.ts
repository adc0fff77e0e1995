import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { startTestGateway, storesLabel, type TestGateway } from "../helpers/gateway.ts";

describe(`boot (${storesLabel})`, () => {
  let gw: TestGateway;
  beforeAll(async () => { gw = await startTestGateway(); }, 60_000);
  afterAll(async () => { await gw?.stop(); }, 60_000);

  test("GET /healthz answers 200 while the process lives", async () => {
    const r = await gw.call("/healthz");
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ ok: true });
    expect(r.headers.get("x-request-id")).toBeTruthy();
  });

  test("GET /readyz checks the database and the KV", async () => {
    const r = await gw.call("/readyz");
    expect(r.status).toBe(200);
    expect(r.body.database.status).toBe("ok");
    expect(r.body.kv.status).toBe("ok");
    expect(r.body.kv.kind).toBe(process.env.REDIS_URL ? "redis" : "memory");
  });

  test("wrong method on a management-style path answers 405 method_not_allowed (flat)", async () => {
    const r = await gw.call("/healthz", { method: "DELETE" });
    expect(r.status).toBe(405);
    expect(r.body.code).toBe("method_not_allowed");
  });
});
