// The usage stream's drain (src/money/ledger/index.ts): every 200 ms while the stream has
// entries or this instance has records of its own in it, about once a second once it has found
// the stream empty five times in a row, so an idle instance does not send Redis five reads a
// second for nothing. Counted on the ledger's own connection.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { eq } from "drizzle-orm";
import { createAccount, REAL_STORES, startTestGateway, type TestGateway } from "../helpers/gateway.ts";
import { startMockOpenAI, type MockUpstream } from "../mocks/openai-upstream.ts";
import { usageRecords } from "../../src/store/db/schema/index.ts";
import { addCredential, addRoutingKey, chatBody, lane } from "./fixtures.ts";
import { until } from "../helpers/until.ts";

const name = REAL_STORES ? "usage drain pace (postgres+redis)" : "usage drain pace: skipped in embedded mode (no usage stream)";

describe.if(REAL_STORES)(name, () => {
  let gw: TestGateway;
  let A: MockUpstream;
  const reads: number[] = [];

  beforeAll(async () => {
    A = await startMockOpenAI();
    gw = await startTestGateway({ PROVIDER_OPENAI_BASE_URL: A.url });
    const client = (gw.ctx.kv as unknown as { client: { xreadgroup: (...a: unknown[]) => Promise<unknown> } }).client;
    const read = client.xreadgroup.bind(client);
    client.xreadgroup = (...a: unknown[]) => {
      reads.push(Date.now());
      return read(...a);
    };
  }, 60_000);
  afterAll(async () => {
    await gw?.stop();
    await A?.stop();
  }, 60_000);

  const readsWithin = (from: number, to: number) => reads.filter((t) => t >= from && t < to).length;

  test("an idle instance reads the usage stream about once a second; one with records of its own in it, every 200 ms until they are written", async () => {
    await Bun.sleep(2500);
    const quietFrom = Date.now();
    await Bun.sleep(3000);
    const quiet = readsWithin(quietFrom, Date.now());
    expect(quiet).toBeGreaterThanOrEqual(2);
    expect(quiet).toBeLessThanOrEqual(5);

    const acct = await createAccount(gw);
    const cred = await addCredential(gw, acct.id, "openai");
    const key = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", cred.id)] });
    const r = await gw.call("/v1/chat/completions", { token: key.raw, body: chatBody() });
    expect(r.status).toBe(200);
    const id = r.headers.get("x-request-id")!;
    // Without a flush: the instance's own record reaches Postgres at the drain's full pace.
    const read = () => gw.ctx.db.select().from(usageRecords).where(eq(usageRecords.requestId, id));
    await until("the record in Postgres", async () => ((await read()).length ? true : null), 5000, 50).catch(() => {});
    expect(await read()).toHaveLength(1);
    const busyFrom = Date.now();
    await Bun.sleep(1000);
    expect(readsWithin(busyFrom, Date.now())).toBeGreaterThanOrEqual(3);
  }, 30_000);
});
