// The dashboard after real traffic through the gateway (mock upstreams on loopback): a success, a
// fallback, a 402 and a 429, then /blitz jobs. Its figures are GET /v1/organizations/usage's
// (client requests, attempts and fallbacks apart, refusals counted), money keeps its significant
// digits, the sub session and seat figures appear only where they exist, the jobs view is the
// jobs API's, and every view fits 360, 1280 and 1920 px without sideways overflow. Runs once, in
// the embedded-defaults pass (see dashboard.test.ts).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import type { Browser, Page } from "playwright-core";
import { addToken, REAL_STORES, type TestGateway } from "../helpers/gateway.ts";
import { addRoutingKey, chatBody, lane, startOpenAIGroqWorld } from "../relay/fixtures.ts";
import { subSessions } from "../../src/store/db/schema/index.ts";
import { newId } from "../../src/lib/ids.ts";
import type { MockUpstream } from "../mocks/openai-upstream.ts";
import { chromiumAvailable, launchChromium, OUTPUT_DIR, overflow, pageUsd } from "./browser.ts";


const run = !REAL_STORES && chromiumAvailable();
const why = REAL_STORES ? " (runs once, in the embedded-defaults pass: skipped against the real stores)" : !chromiumAvailable() ? " (skipped: no /usr/bin/chromium; .ci/run installs it)" : "";
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const LONG_LABEL = "fleet-" + "x".repeat(54);
const VIEWS = ["overview", "keys", "health", "requests", "jobs"] as const;
const WIDTHS = [360, 1280, 1920];

let gw: TestGateway;
let A: MockUpstream, B: MockUpstream;
let browser: Browser;
let acct: { id: string; token: string };
let rk: string;
let keys: Record<string, { id: string; raw: string }>;
const pageErrors: string[] = [];

async function open(width: number, view: string, token = rk): Promise<Page> {
  const page = await browser.newPage({ viewport: { width, height: 900 } });
  page.on("pageerror", (e) => pageErrors.push(String(e)));
  page.on("console", (m) => { if (m.type() === "error" && !m.text().includes("status of 4")) pageErrors.push(m.text()); });
  await page.goto(`${gw.url}/dashboard`);
  await page.fill("#token", token);
  await page.click("#sign-in-form button[type=submit]");
  await page.waitForSelector("#totals");
  if (view !== "overview") {
    await page.click(`nav a[data-view=${view}]`);
    await page.waitForSelector(`#view[data-view=${view}][aria-busy=false]`);
  }
  return page;
}

const usage = async () => (await gw.call("/v1/organizations/usage", { token: rk })).body;

async function waitEnded(token: string, id: string) {
  const until = Date.now() + 60_000;
  for (;;) {
    const r = await gw.call(`/blitz/jobs/${id}?limit=1`, { token });
    if (!["queued", "running"].includes(r.body.status) && r.body.progress.remaining === 0) return r.body;
    if (Date.now() > until) throw new Error(`job did not end: ${JSON.stringify(r.body)}`);
    await sleep(100);
  }
}

describe.skipIf(!run)(`dashboard counts and layout after real traffic, in chromium${why}`, () => {
  beforeAll(async () => {
    const world = await startOpenAIGroqWorld();
    ({ gw, A, B, acct } = world);
    rk = await addToken(gw, acct.id, "read_only");
    keys = {
      main: await addRoutingKey(gw, acct.id, { label: "agents-prod", lanes: [lane("openai", world.credA.id), lane("groq", world.credB.id)] }),
      broke: await addRoutingKey(gw, acct.id, { label: "broke", monthlyBudgetUsd: 0.000000001, lanes: [lane("openai", world.credA.id)] }),
      slow: await addRoutingKey(gw, acct.id, { label: LONG_LABEL, rpmLimit: 1, monthlyBudgetUsd: 50, lanes: [lane("groq", world.credB.id)] }),
      batch: await addRoutingKey(gw, acct.id, { label: "batch", lanes: [lane("openai", world.credA.id)] }),
    };
    const chat = (key: string, body = chatBody()) => gw.call("/v1/chat/completions", { token: keys[key]!.raw, body });
    // A success on the first lane; a fallback (the first lane answers 503, the second serves it); a 402; a success then a 429.
    expect((await chat("main", chatBody({ mock: { prompt_tokens: 12, completion_tokens: 7 } }))).status).toBe(200);
    A.setDefault({ status: 503 });
    try {
      expect((await chat("main", chatBody({ mock: { prompt_tokens: 12, completion_tokens: 7 } }))).status).toBe(200);
    } finally {
      A.setDefault({});
    }
    expect((await chat("broke")).status).toBe(402);
    // A model the pricing catalog does not know, on a key with a budget: priced at the fallback price, marked estimated.
    expect((await chat("slow", chatBody({ model: "mock-unpriced-model-for-dashboard-layout-checks", mock: { prompt_tokens: 3, completion_tokens: 2 } }))).status).toBe(200);
    expect((await chat("slow")).status).toBe(429);
    await gw.ctx.services.usage.flush();
    browser = await launchChromium();
  }, 90_000);
  afterAll(async () => {
    await browser?.close();
    await gw?.stop();
    await Promise.all([A, B].map((m) => m?.stop()));
  }, 60_000);

  test("requests are client requests: a success, a fallback, a 402 and a 429 read as 3 requests, 4 attempts, 1 fallback, 1 + 1 refused — the same figures as GET /v1/organizations/usage", async () => {
    const u = await usage();
    expect(u.totals).toMatchObject({ requests: 3, errors: 0, attempts: 4, fallbacks: 1, budget_refusals: 1, rate_limit_refusals: 1 });
    const page = await open(1280, "overview");
    for (const f of ["requests", "errors", "attempts", "fallbacks", "budget_refusals", "rate_limit_refusals", "prompt_tokens", "completion_tokens", "cost_usd"]) {
      expect([f, await page.getAttribute(`#totals [data-figure=${f}]`, "data-value")]).toEqual([f, String(u.totals[f])]);
    }
    expect(await page.textContent("#totals [data-figure=requests] strong")).toBe("3");
    expect(await page.textContent("#totals [data-figure=attempts] strong")).toBe("4");
    expect(await page.textContent("#totals [data-figure=fallbacks] strong")).toBe("1");
    expect(await page.textContent("#totals [data-figure=budget_refusals] strong")).toBe("1");
    expect(await page.textContent("#totals [data-figure=rate_limit_refusals] strong")).toBe("1");
    // Per lane: openai failed once (the fallback) and served once; groq served the fallback and the slow key's call.
    const lanes = Object.fromEntries((await gw.call("/v1/organizations/usage/groups?by=lane", { token: rk })).body.groups.map((g: any) => [String(g.provider), g]));
    for (const p of ["openai", "groq"]) {
      const row = page.locator(`#lane-table tr[data-lane="${p}"]`);
      for (const f of ["requests", "attempts", "failed_attempts", "fallbacks"]) {
        expect([p, f, await row.locator(`[data-figure=${f}]`).textContent()]).toEqual([p, f, String(lanes[p][f])]);
      }
    }
    expect([lanes.openai.attempts, lanes.openai.fallbacks, lanes.groq.requests]).toEqual([2, 1, 2]);
    // Refusals reached no lane: no lane row for them.
    expect(await page.locator("#lane-table tbody tr").count()).toBe(2);
    // No seat traffic, no sub session: no seat figures (and nothing absent written out as text).
    expect(await page.locator("#seat").count()).toBe(0);
    expect(await page.textContent("#view")).not.toMatch(/null|undefined|NaN/);
    await page.screenshot({ path: join(OUTPUT_DIR, "overview-after-traffic.png"), fullPage: true });
    await page.close();
  }, 60_000);

  test("money keeps its significant digits: never $0.00 or $0.0000 for an amount that is not zero, an estimated price reads \"<amount> est.\"", async () => {
    const page = await open(1280, "overview");
    const usd = (n: number) => pageUsd(page, n);
    expect(await Promise.all([0, 0.0009, 0.00009, 0.0123, 0.5, 12.5, 1234.567, 0.000000001].map(usd)))
      .toEqual(["$0.00", "$0.0009", "$0.00009", "$0.0123", "$0.50", "$12.50", "$1,234.57", "$0.000000001"]);
    const u = await usage();
    expect(u.totals.cost_usd).toBeGreaterThan(0);
    expect(await page.textContent("#totals [data-figure=cost_usd] strong")).toBe(await usd(u.totals.cost_usd));
    expect(await page.textContent("#totals [data-figure=cost_usd] strong")).not.toMatch(/^\$0\.0*$/);
    await page.click("nav a[data-view=requests]");
    await page.waitForSelector("#records-table");
    const records = (await gw.call("/v1/organizations/usage/records?limit=50", { token: rk })).body.records;
    for (const r of records) {
      const text = (await page.textContent(`#records-table tr[data-record="${r.id}"] [data-figure=cost_usd]`))!;
      expect([r.id, text]).toEqual([r.id, `${await usd(r.cost_usd)}${r.price_estimated ? " est." : ""}`]);
      if (r.cost_usd > 0) expect(text).not.toMatch(/^\$0\.0*( est\.)?$/);
    }
    expect(records.some((r: any) => r.price_estimated && r.cost_usd > 0)).toBe(true);
    await page.close();
  }, 60_000);

  test("the sub session shows only where one exists: an account that never connected one sees no sub section and no 'pending'", async () => {
    const page = await open(1280, "health");
    expect(await page.locator("#sub-session").count()).toBe(0);
    expect(await page.textContent("#view")).not.toContain("pending");
    await page.click("nav a[data-view=requests]");
    await page.waitForSelector("#records-table");
    expect(await page.locator("#filter-provider option").allTextContents()).toEqual(["any lane", "groq", "openai"]);
    await page.close();
  }, 60_000);

  test("the sub session shows where one exists: once one was connected, Lanes' health shows its state and the lane editor offers sub lanes", async () => {
    const before = await open(1280, "keys", acct.token);
    await before.locator("details.lane-edit summary").first().click();
    expect(await before.locator("details.lane-edit select[name=provider] option").first().textContent()).not.toBe("sub");
    expect(await before.locator("details.lane-edit select[name=provider] option", { hasText: /^sub$/ }).count()).toBe(0);
    await before.close();
    // A sign-in connected earlier that has since expired: it exists, so it is shown (no backend is called for it).
    await gw.ctx.db.insert(subSessions).values({ id: newId("sub"), accountId: acct.id, status: "connected", provisioned: true, accountStatus: "active",
      connectedAt: new Date(Date.now() - 7200_000), expiresAt: new Date(Date.now() - 3600_000) });
    const sub = (await gw.call("/v1/organizations/sub-session", { token: rk })).body;
    expect(sub.id).not.toBeNull();
    const page = await open(1280, "health");
    await page.waitForSelector("#sub-session");
    expect(await page.textContent("#sub-session dd:first-of-type")).toBe(sub.status);
    await page.close();
    const keysPage = await open(1280, "keys", acct.token);
    await keysPage.locator("details.lane-edit summary").first().click();
    expect(await keysPage.locator("details.lane-edit select[name=provider]").first().locator("option", { hasText: /^sub$/ }).count()).toBe(1);
    await keysPage.close();
  }, 60_000);

  test("Blitz jobs view: each of the account's jobs (from any of its keys) with status, progress done / total and cost, as the jobs API reports them", async () => {
    const submit = async (key: string, prompts: unknown[]) => {
      const r = await gw.call("/blitz/jobs", { token: keys[key]!.raw, body: { model: "gpt-4o-mini", max_tokens: 20, prompts } });
      expect(r.status).toBe(202);
      return String(r.body.id);
    };
    const done = await submit("main", [0, 1, 2].map((i) => ({ messages: [{ role: "user", content: `job one ${i}` }], mock: { prompt_tokens: 20, completion_tokens: 5 } })));
    await waitEnded(keys.main!.raw, done);
    // A job cancelled while its prompts wait: the ones not started never run.
    const slowPrompts = Array.from({ length: 6 }, (_, i) => ({ messages: [{ role: "user", content: `job two ${i}` }], mock: { latency_ms: 800 } }));
    const cancelled = await submit("batch", slowPrompts);
    expect((await gw.call(`/blitz/jobs/${cancelled}`, { method: "DELETE", token: keys.batch!.raw })).status).toBe(200);
    await waitEnded(keys.batch!.raw, cancelled);

    const list = (await gw.call("/v1/organizations/blitz-jobs", { token: rk })).body.jobs;
    expect(list.map((j: any) => j.id)).toEqual([cancelled, done]);
    const page = await open(1280, "jobs");
    await page.waitForSelector("#jobs-table");
    expect(await page.locator("#jobs-table tbody tr").count()).toBe(2);
    for (const j of list) {
      const row = page.locator(`#jobs-table tr[data-job="${j.id}"]`);
      const api = (await gw.call(`/blitz/jobs/${j.id}?limit=1`, { token: j.id === done ? keys.main!.raw : keys.batch!.raw })).body;
      expect([api.status, api.progress.done, api.total, api.cost_usd]).toEqual([j.status, j.progress.done, j.total, j.cost_usd]);
      expect(await row.getAttribute("data-status")).toBe(api.status);
      expect((await row.locator("[data-figure=status]").textContent())!.startsWith(api.status)).toBe(true);
      expect((await row.locator("[data-figure=progress]").textContent())!.trim()).toBe(`${api.progress.done} / ${api.total}`);
      expect(await row.locator("[data-figure=cost_usd]").textContent()).toBe(await pageUsd(page, api.cost_usd));
    }
    expect(list.find((j: any) => j.id === done)).toMatchObject({ status: "completed", total: 3, progress: { done: 3, succeeded: 3 }, routing_key_label: "agents-prod" });
    expect(list.find((j: any) => j.id === done).cost_usd).toBeGreaterThan(0);
    expect(list.find((j: any) => j.id === cancelled)).toMatchObject({ status: "cancelled", total: 6, routing_key_label: "batch" });
    await page.screenshot({ path: join(OUTPUT_DIR, "jobs.png"), fullPage: true });
    await page.close();
  }, 120_000);

  for (const width of WIDTHS) {
    test(`layout: every view fits ${width} px — document scrollWidth ≤ clientWidth, no element wider than the viewport, no table cell cut`, async () => {
      for (const view of [...VIEWS, "keys-sk"]) {
        // keys-sk: the keys view with an sk_ token, its forms and every lane editor open.
        const page = await open(width, view === "keys-sk" ? "keys" : view, view === "keys-sk" ? acct.token : rk);
        if (view === "requests") await page.waitForSelector("#records-table");
        if (view === "keys-sk") for (const s of await page.locator("details.lane-edit summary").all()) await s.click();
        expect([view, await overflow(page)]).toEqual([view, []]);
        expect([view, await page.textContent("#view")]).not.toEqual([view, expect.stringMatching(/\bnull\b|undefined|NaN/)]);
        await page.screenshot({ path: join(OUTPUT_DIR, `${view}-${width}.png`), fullPage: true });
        await page.close();
      }
    }, 120_000);
  }

  test("no script errors on any page", () => {
    expect(pageErrors).toEqual([]);
  });
});
