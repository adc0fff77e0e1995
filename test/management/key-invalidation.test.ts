// A revoked or regenerated routing key stops working at once on every gateway instance sharing
// the stores, although inference caches keys: management publishes the invalidation, the key
// cache drops the entry. With REDIS_URL set a second instance shares Postgres and Redis; on the
// embedded defaults there is one instance.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createAccount, REAL_STORES, startTestGateway, storesLabel, type TestGateway } from "../helpers/gateway.ts";
import { eventually } from "./helpers.ts";

let gw: TestGateway;
let peer: TestGateway | null = null;
let A: { id: string; token: string };

beforeAll(async () => {
  gw = await startTestGateway();
  if (REAL_STORES) peer = await startTestGateway({}, { shareWith: gw });
  A = await createAccount(gw);
}, 60_000);
afterAll(async () => {
  await peer?.stop();
  await gw?.stop();
}, 60_000);

const instances = () => [gw, ...(peer ? [peer] : [])];
const keyStatus = async (g: TestGateway, raw: string) => (await g.call("/v1/key", { token: raw })).status;

/** The management instance answers at once; a peer hears it over Redis pub/sub within moments. */
async function expectEverywhere(raw: string, status: number) {
  expect(await keyStatus(gw, raw)).toBe(status);
  if (peer) await eventually(async () => (await keyStatus(peer!, raw)) === status, 3000);
}

describe(`key invalidation across instances (${storesLabel})`, () => {
  test("a revoked key answers 401 invalid_api_key at once on every instance, though each had it cached; revoked: false restores it", async () => {
    const made = (await gw.call("/v1/organizations/routing-keys", { method: "POST", token: A.token, body: { label: "cached" } })).body;
    for (const g of instances()) expect(await keyStatus(g, made.raw_key)).toBe(200); // warm every cache
    const r = await gw.call(`/v1/organizations/routing-keys?id=${made.routing_key.id}`, { method: "PATCH", token: A.token, body: { revoked: true } });
    expect(r.status).toBe(200);
    await expectEverywhere(made.raw_key, 401);
    const body = (await gw.call("/v1/key", { token: made.raw_key })).body;
    expect(body.error.code).toBe("invalid_api_key");
    await gw.call(`/v1/organizations/routing-keys?id=${made.routing_key.id}`, { method: "PATCH", token: A.token, body: { revoked: false } });
    await expectEverywhere(made.raw_key, 200);
  });

  test("after regenerate the old secret answers 401 everywhere and the new one works", async () => {
    const made = (await gw.call("/v1/organizations/routing-keys", { method: "POST", token: A.token, body: {} })).body;
    for (const g of instances()) expect(await keyStatus(g, made.raw_key)).toBe(200);
    const regen = (await gw.call(`/v1/organizations/routing-keys?id=${made.routing_key.id}`, { method: "PATCH", token: A.token, body: { regenerate: true } })).body;
    await expectEverywhere(made.raw_key, 401);
    await expectEverywhere(regen.raw_key, 200);
  });

  test("any other PATCH is seen at once too: the cached key shows the new label everywhere", async () => {
    const made = (await gw.call("/v1/organizations/routing-keys", { method: "POST", token: A.token, body: { label: "old label" } })).body;
    for (const g of instances()) expect((await g.call("/v1/key", { token: made.raw_key })).body.label).toBe("old label");
    await gw.call(`/v1/organizations/routing-keys?id=${made.routing_key.id}`, { method: "PATCH", token: A.token, body: { label: "new label" } });
    expect((await gw.call("/v1/key", { token: made.raw_key })).body.label).toBe("new label");
    if (peer) await eventually(async () => (await peer!.call("/v1/key", { token: made.raw_key })).body.label === "new label", 3000);
  });
});
