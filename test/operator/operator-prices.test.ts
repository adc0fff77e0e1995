// CONTRACT §9 "Prices": the operator (never a tenant) prices a model through PRICES_FILE (read at
// start and on SIGHUP) and the admin command (the operator_prices table every instance reads); an
// operator price wins over the catalog's, and every record says where its price came from.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { calcPrice } from "@pydantic/genai-prices";
import { eq } from "drizzle-orm";
import { storesLabel } from "../helpers/gateway.ts";
import { addRoutingKey, lane, startRelayWorld, usageRows, type RelayWorld } from "../helpers/relay-world.ts";
import { until } from "../helpers/until.ts";
import { runAdminCommand } from "../../src/admin/commands.ts";
import { publishInvalidation } from "../../src/store/invalidation.ts";
import { usageRecords } from "../../src/store/db/schema/index.ts";
import { spawnGateway } from "../relay/child-gateway.ts";

const dir = mkdtempSync(join(tmpdir(), "prices-"));
const file = join(dir, "prices.json");
const writePrices = (prices: unknown[]) => writeFileSync(file, JSON.stringify({ prices }));
// A model the catalog does not know, priced by the operator.
const SOL = { provider: "openai", model: "gpt-6.1-sol", input_per_mtok: 2, output_per_mtok: 8, cache_read_per_mtok: 0.2 };

describe(`operator prices (${storesLabel})`, () => {
  let w: RelayWorld<"openai">;
  let key: { raw: string };
  let budgeted: { raw: string };
  beforeAll(async () => {
    writePrices([SOL]);
    w = await startRelayWorld({ providers: ["openai"], env: { PRICES_FILE: file } });
    key = await addRoutingKey(w.gw, w.acct.id, { lanes: [lane("openai", w.cred.openai.id)] });
    budgeted = await addRoutingKey(w.gw, w.acct.id, { lanes: [lane("openai", w.cred.openai.id)], monthlyBudgetUsd: 100 });
  }, 60_000);
  afterAll(async () => {
    await w?.stop();
    rmSync(dir, { recursive: true, force: true });
  }, 60_000);

  const chat = (raw: string, model: string, mock: Record<string, number> = { prompt_tokens: 1_000, completion_tokens: 100, cached_tokens: 400 }) =>
    w.gw.call("/v1/chat/completions", { token: raw, body: { model, messages: [{ role: "user", content: "Price me." }], max_tokens: 200, mock } });
  const recordOf = async (r: { headers: Headers }) => {
    const rows = await usageRows(w.gw, eq(usageRecords.requestId, r.headers.get("x-request-id")!));
    expect(rows).toHaveLength(1);
    return rows[0]!;
  };
  const admin = (args: string[]) => {
    const out: string[] = [], err: string[] = [];
    const ctx = w.gw.ctx;
    return runAdminCommand(ctx.db, args, { out: (l) => out.push(l), err: (l) => err.push(l) }, {
      accountChanged: async () => {},
      pricesChanged: async () => {
        await ctx.services.prices.reloadDb();
        await publishInvalidation(ctx, { kind: "prices" });
      },
    }).then((code) => ({ code, out, err }));
  };

  test("CONTRACT §9: a call on a model priced in PRICES_FILE records that price, price_source operator, and its answer says so", async () => {
    const r = await chat(key.raw, "gpt-6.1-sol");
    expect(r.status).toBe(200);
    const row = await recordOf(r);
    const expected = (600 * 2 + 400 * 0.2 + 100 * 8) / 1e6;
    expect(row.costUsd).toBeCloseTo(expected, 15);
    expect(row.priceSource).toBe("operator");
    expect(row.priceEstimated).toBe(false);
    expect(r.body.usage.cost).toBeCloseTo(expected, 15);
    const page = await w.gw.call(`/v1/organizations/usage/records?limit=5`, { token: w.acct.token });
    expect(page.body.records.find((x: any) => x.request_id === r.headers.get("x-request-id"))).toMatchObject({ price_source: "operator", cost_usd: row.costUsd });
  });

  test("CONTRACT §9: records say catalog for a catalog price and fallback for a model nobody priced on a budgeted key", async () => {
    const cat = await recordOf(await chat(key.raw, "gpt-4o-mini"));
    expect(cat.priceSource).toBe("catalog");
    expect(cat.costUsd).toBeCloseTo(calcPrice({ input_tokens: 1_000, cache_read_tokens: 400, output_tokens: 100 }, "gpt-4o-mini", { providerId: "openai" })!.total_price, 12);
    const fb = await recordOf(await chat(budgeted.raw, "gpt-6.1-unpriced"));
    expect(fb.priceSource).toBe("fallback");
    expect(fb.priceEstimated).toBe(true);
  });

  test("CONTRACT §9: the admin command prices a model for every instance, winning over the catalog; delete brings the catalog back", async () => {
    const set = await admin(["prices", "set", "openai", "gpt-4o-mini", "--input", "3", "--output", "9"]);
    expect(set.code).toBe(0);
    const row = await recordOf(await chat(key.raw, "gpt-4o-mini", { prompt_tokens: 1_000, completion_tokens: 100 }));
    expect(row.priceSource).toBe("operator");
    expect(row.costUsd).toBeCloseTo((1_000 * 3 + 100 * 9) / 1e6, 15);
    const list = await admin(["prices", "list"]);
    expect(list.out.join("\n")).toContain("openai  gpt-4o-mini  input 3  output 9");
    // The table wins over PRICES_FILE for the same model.
    await admin(["prices", "set", "openai", "gpt-6.1-sol", "--input", "1", "--output", "1"]);
    expect((await recordOf(await chat(key.raw, "gpt-6.1-sol", { prompt_tokens: 1_000, completion_tokens: 100 }))).costUsd).toBeCloseTo(1_100 / 1e6, 15);
    expect((await admin(["prices", "delete", "openai", "gpt-6.1-sol"])).code).toBe(0);
    expect((await admin(["prices", "delete", "openai", "gpt-4o-mini"])).code).toBe(0);
    expect((await recordOf(await chat(key.raw, "gpt-4o-mini"))).priceSource).toBe("catalog");
    // The file's price of gpt-6.1-sol is back.
    expect((await recordOf(await chat(key.raw, "gpt-6.1-sol", { prompt_tokens: 1_000, completion_tokens: 0 }))).costUsd).toBeCloseTo(2_000 / 1e6, 15);
  });

  test("CONTRACT §9: usage grouped by model says who prices each model, so the dashboard can flag the unpriced ones", async () => {
    await w.gw.ctx.services.usage.flush();
    const groups = (await w.gw.call("/v1/organizations/usage/groups?by=model", { token: w.acct.token })).body.groups;
    const of = (model: string) => groups.find((g: any) => g.model === model)?.price_source;
    expect(of("gpt-6.1-sol")).toBe("operator");
    expect(of("gpt-4o-mini")).toBe("catalog");
    expect(of("gpt-6.1-unpriced")).toBeNull();
  });

  test("CONTRACT §9: the admin command refuses bad prices with a sentence and changes nothing", async () => {
    const neg = await admin(["prices", "set", "openai", "m", "--input", "-1", "--output", "2"]);
    expect(neg.code).toBe(2);
    expect(neg.err.join()).toContain("--input");
    const missing = await admin(["prices", "set", "openai", "m", "--input", "1"]);
    expect(missing.code).toBe(2);
    expect(missing.err.join()).toContain("--output is required");
    expect((await admin(["prices", "set", "openai", "m", "--input", "x", "--output", "2"])).code).toBe(2);
    expect((await admin(["prices", "list"])).out.at(-1)).toBe("0 operator prices");
  });

  test("CONTRACT §9: a tenant cannot set prices: no management route takes them, and a routing key's body cannot carry them", async () => {
    for (const path of ["/v1/organizations/prices", "/v1/prices", "/admin/prices"]) {
      const r = await w.gw.call(path, { token: w.acct.token, body: { prices: [SOL] } });
      expect([404, 405]).toContain(r.status);
    }
    const r = await w.gw.call("/v1/organizations/routing-keys", { token: w.acct.token, body: { label: "x", prices: [SOL] } });
    expect(r.status).toBe(400);
    const doc = await w.gw.call("/openapi.json");
    expect(Object.keys(doc.body.paths).filter((p) => p.includes("price"))).toEqual([]);
  });

  test("CONTRACT §9: reloading PRICES_FILE takes a valid file's prices and keeps the previous ones when the file is invalid", async () => {
    const prices = w.gw.ctx.services.prices;
    writePrices([{ ...SOL, input_per_mtok: 5 }]);
    expect(prices.reloadFile()).toBe(true);
    expect((await recordOf(await chat(key.raw, "gpt-6.1-sol", { prompt_tokens: 1_000, completion_tokens: 0 }))).costUsd).toBeCloseTo(5_000 / 1e6, 15);
    writeFileSync(file, `{"prices": [{"provider": "openai", "model": "gpt-6.1-sol", "input_per_mtok": "cheap"}]}`);
    expect(prices.reloadFile()).toBe(false);
    expect((await recordOf(await chat(key.raw, "gpt-6.1-sol", { prompt_tokens: 1_000, completion_tokens: 0 }))).costUsd).toBeCloseTo(5_000 / 1e6, 15);
    expect(w.gw.logs.join("\n")).toContain("PRICES_FILE not reloaded");
    writePrices([SOL]);
    expect(prices.reloadFile()).toBe(true);
  });
});

describe("PRICES_FILE at boot and on SIGHUP (a gateway process)", () => {
  const pdir = mkdtempSync(join(tmpdir(), "prices-proc-"));
  const pfile = join(pdir, "prices.json");
  afterAll(() => rmSync(pdir, { recursive: true, force: true }), 10_000);

  test("CONTRACT §9: SIGHUP reloads PRICES_FILE; an invalid file then is logged and the previous prices stay", async () => {
    writeFileSync(pfile, JSON.stringify({ prices: [SOL] }));
    const gw = await spawnGateway({ PRICES_FILE: pfile, DATA_DIR: join(pdir, "data") }, 60_000);
    try {
      expect(gw.output()).toContain("operator prices loaded");
      writeFileSync(pfile, JSON.stringify({ prices: [SOL, { ...SOL, model: "gpt-6.1-luna" }] }));
      gw.signal("SIGHUP");
      await until("the reload's log line", async () => (gw.output().includes("SIGHUP: operator prices reloaded from PRICES_FILE") ? true : null), 10_000);
      expect(gw.output()).toMatch(/"fileEntries":2[^\n]*SIGHUP: operator prices reloaded/);
      writeFileSync(pfile, "{not json");
      gw.signal("SIGHUP");
      await until("the refusal's log line", async () => (gw.output().includes("SIGHUP: PRICES_FILE not reloaded, the previous prices stay") ? true : null), 10_000);
      // Still serving.
      expect((await fetch(`${gw.url}/healthz`)).status).toBe(200);
    } finally {
      await gw.terminate();
    }
  }, 90_000);

  test("CONTRACT §9: an invalid PRICES_FILE at start fails the boot with a message naming the file and the fault", async () => {
    writeFileSync(pfile, JSON.stringify({ prices: [{ provider: "openai", model: "m", input_per_mtok: 1 }] }));
    const proc = Bun.spawn([join(import.meta.dir, "../../node_modules/.bin/bun"), "src/main.ts"], {
      cwd: join(import.meta.dir, "../.."),
      env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "", HOST: "127.0.0.1", PORT: "0", NODE_ENV: "test", PRICES_FILE: pfile, DATA_DIR: join(pdir, "data2") },
      stdout: "pipe", stderr: "pipe",
    });
    const code = await proc.exited;
    const text = (await new Response(proc.stdout).text()) + (await new Response(proc.stderr).text());
    expect(code).not.toBe(0);
    expect(text).toContain(`PRICES_FILE ${pfile} is invalid at prices.0.output_per_mtok`);
  }, 90_000);
});
