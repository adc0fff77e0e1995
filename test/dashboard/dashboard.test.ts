// The dashboard in a real browser (Debian chromium via playwright-core): sign in with rk_ and see
// the API's figures, act with sk_ and see the API confirm, the payment page while unpaid, the
// CSP on every file, no console errors, hostile labels shown as text. Screenshots of each view go
// to test-output/dashboard/. One store mode is enough for a browser: it runs on the embedded
// defaults and is skipped (with the reason in its name) against the real stores.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import type { Browser, Page } from "playwright-core";
import { addToken, createAccount, REAL_STORES, startTestGateway, type TestGateway } from "../helpers/gateway.ts";
import { usageRecords } from "../../src/store/db/schema/index.ts";
import { DASHBOARD_CSP } from "../../src/dashboard/routes.ts";
import { counterKey } from "../../src/money/counters.ts";
import { monthKey } from "../../src/lib/time.ts";
import { chromiumAvailable, launchChromium, OUTPUT_DIR, pageUsd } from "./browser.ts";

// Page-side globals inside page.evaluate callbacks (the test itself is not compiled against the DOM lib).
declare const window: any, document: any, location: any, localStorage: any, sessionStorage: any;

const run = !REAL_STORES && chromiumAvailable();
const why = REAL_STORES ? " (runs once, in the embedded-defaults pass: skipped against the real stores)" : !chromiumAvailable() ? " (skipped: no /usr/bin/chromium; .ci/run installs it)" : "";
const HOSTILE = `<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>&amp;"'`;

let gw: TestGateway;
let browser: Browser;
let acct: { id: string; token: string };
let rk: string;
const consoleErrors: string[] = [];
const cspByPath = new Map<string, string | null>();
const failedResponses: string[] = [];

async function newPage(width = 1280, height = 900): Promise<Page> {
  const page = await browser.newPage({ viewport: { width, height } });
  page.on("console", (m) => { if (m.type() === "error") consoleErrors.push(m.text()); });
  page.on("pageerror", (e) => consoleErrors.push(String(e)));
  page.on("response", (r) => {
    const u = new URL(r.url());
    if (u.pathname.startsWith("/dashboard")) cspByPath.set(u.pathname, r.headers()["content-security-policy"] ?? null);
    if (r.status() >= 400) failedResponses.push(`${r.status()} ${u.pathname}`);
  });
  return page;
}

async function signIn(page: Page, token: string) {
  await page.goto(`${gw.url}/dashboard`);
  await page.fill("#token", token);
  await page.click("#sign-in-form button[type=submit]");
}

const shot = (page: Page, name: string) => page.screenshot({ path: join(OUTPUT_DIR, `${name}.png`), fullPage: true });

async function seed() {
  acct = await createAccount(gw);
  rk = await addToken(gw, acct.id, "read_only");
  const post = (path: string, body: unknown) => gw.call(path, { method: "POST", token: acct.token, body });
  const cred = (await post("/v1/organizations/credentials", { provider: "openai", api_key: "sk-test-0000000000001234", label: HOSTILE.slice(0, 60) })).body.credential;
  await post("/v1/organizations/credentials", { provider: "anthropic", api_key: "sk-ant-test-000000005678", label: "team anthropic" });
  const anth = (await gw.call("/v1/organizations/credentials", { token: acct.token })).body.credentials.find((c: any) => c.provider === "anthropic");
  await post("/v1/organizations/bridges", { base_url: "http://127.0.0.1:9/", token: "bridge-token-abcd", label: HOSTILE });
  const k1 = (await post("/v1/organizations/routing-keys", { label: "agents-prod", monthly_budget_usd: 5,
    providers: [{ provider: "anthropic", credential_id: anth.id }, { provider: "openai", credential_id: cred.id, model: "gpt-4o-mini" }] })).body.routing_key;
  const k2 = (await post("/v1/organizations/routing-keys", { label: "research-fleet", monthly_budget_usd: 0.5 })).body.routing_key;
  await post("/v1/organizations/routing-keys", { label: "ci-bots" });
  // A key whose label is markup; revoked, so it shows on the Keys view and not in the overview.
  const k3 = (await post("/v1/organizations/routing-keys", { label: HOSTILE.slice(0, 60), monthly_budget_usd: 1 })).body.routing_key;
  await gw.call(`/v1/organizations/routing-keys?id=${k3.id}`, { method: "PATCH", token: acct.token, body: { revoked: true } });
  const now = Date.now();
  const row = (o: Partial<typeof usageRecords.$inferInsert>) => ({ accountId: acct.id, endpoint: "chat", status: 200, outcome: "ok", provider: "openai", laneIndex: 0, attempt: 1, model: "gpt-4o-mini", ...o });
  const rows: Array<typeof usageRecords.$inferInsert> = [];
  for (let i = 0; i < 12; i++) {
    const at = new Date(now - (i % 4) * 3600_000 - 60_000);
    rows.push(row({ requestId: `r${i}`, routingKeyId: k1.id, provider: "anthropic", model: "claude-sonnet-4", status: i % 3 === 0 ? 529 : 200, outcome: i % 3 === 0 ? "error" : "ok",
      promptTokens: i % 3 === 0 ? 0 : 400 + i, completionTokens: i % 3 === 0 ? 0 : 80, costUsd: i % 3 === 0 ? 0 : 0.0123, latencyMs: 900 + i * 10, ttfbMs: i % 3 === 0 ? null : 250 + i * 20, createdAt: at }));
    if (i % 3 === 0) rows.push(row({ requestId: `r${i}`, attempt: 2, routingKeyId: k1.id, laneIndex: 1, promptTokens: 410, completionTokens: 70, costUsd: 0.0009, latencyMs: 700, ttfbMs: 180, createdAt: new Date(at.getTime() + 1000) }));
  }
  rows.push(row({ requestId: "seat-1", routingKeyId: k2.id, provider: "sub", model: "gpt-5", seat: true, promptTokens: 2000, completionTokens: 300, costUsd: 0.04, latencyMs: 1500, ttfbMs: 600, createdAt: new Date(now - 120_000) }));
  for (let i = 0; i < 6; i++) {
    rows.push(row({ requestId: `m${i}`, routingKeyId: k2.id, provider: "openai", model: "gpt-4o", promptTokens: 3000, completionTokens: 900, costUsd: 0.0165, latencyMs: 2100, ttfbMs: 420 + i * 15, createdAt: new Date(now - 180_000 - i * 1000) }));
  }
  // Record keys as the relay writes them (`<money call>.<attempt>`): a request's attempts share a call.
  for (const r of rows) r.recordKey = `${acct.id}.${r.requestId}.${r.attempt}`;
  await gw.ctx.db.insert(usageRecords).values(rows);
  // Rows inserted here bypassed the budget counters: drop them so each is rebuilt from Postgres, as after a Redis restart.
  for (const k of [k1, k2]) await gw.ctx.kv.del(counterKey(k.id, monthKey()));
}

describe.skipIf(!run)(`dashboard in chromium${why}`, () => {
  beforeAll(async () => {
    gw = await startTestGateway();
    await seed();
    browser = await launchChromium();
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await gw?.stop();
  }, 60_000);

  test("rk_: the overview's figures are GET /v1/organizations/usage's, per lane too; every view renders; hostile labels are text; CSP on page and assets", async () => {
    const page = await newPage();
    await signIn(page, rk);
    await page.waitForSelector("#totals");
    const usage = (await gw.call("/v1/organizations/usage", { token: rk })).body;
    for (const f of ["requests", "errors", "prompt_tokens", "completion_tokens", "cost_usd", "cache_hits", "saved_usd"]) {
      expect([f, await page.getAttribute(`#totals [data-figure=${f}]`, "data-value")]).toEqual([f, String(usage.totals[f])]);
    }
    expect(await page.textContent("#totals [data-figure=requests] strong")).toBe(usage.totals.requests.toLocaleString("en-US"));
    // Money as the page's formatter writes it (its rule has its own test in counts-layout.test.ts).
    const usd = (n: number) => pageUsd(page, n);
    expect(await page.textContent("#totals [data-figure=cost_usd] strong")).toBe(await usd(usage.totals.cost_usd));
    const groups = (await gw.call("/v1/organizations/usage/groups?by=lane", { token: rk })).body.groups;
    for (const p of usage.by_provider) {
      const cells = page.locator(`#lane-table tr[data-lane="${p.provider}"]`);
      const g = groups.find((x: any) => x.provider === p.provider);
      expect([p.provider, await cells.locator("[data-figure=requests]").textContent(), await cells.locator("[data-figure=failed_attempts]").textContent()])
        .toEqual([p.provider, String(p.requests), String(g.failed_attempts)]);
    }
    expect(await page.textContent(`#lane-table tr[data-lane="anthropic"] [data-figure=fallbacks]`)).toBe("4");
    expect(await page.getAttribute("#seat [data-figure=seat_requests]", "data-value")).toBe("1");
    for (const k of (await gw.call("/v1/organizations/routing-keys", { token: rk })).body.routing_keys.filter((k: any) => !k.revoked_at)) {
      expect([k.label, await page.textContent(`#budget-table tr[data-key="${k.id}"] td:nth-child(2)`)])
        .toEqual([k.label, await usd(k.current_month_spend_usd)]);
    }
    expect(await page.locator("#budget-chart").count()).toBe(1);
    expect(await page.locator("#daily-chart").count()).toBe(1);
    // chart.js drew on both canvases (served from this origin, no CDN).
    expect(await page.evaluate(() => typeof (window as any).Chart)).toBe("function");
    await shot(page, "overview");

    await page.click("nav a[data-view=keys]");
    await page.waitForSelector("#keys");
    expect(await page.locator("#create-key").count()).toBe(0); // read-only: no actions
    expect(await page.locator(".key-label").allTextContents()).toContain(HOSTILE.slice(0, 60));
    await shot(page, "keys-read-only");

    await page.click("nav a[data-view=health]");
    await page.waitForSelector("#bridge-table");
    expect(await page.textContent("#bridge-table tbody td")).toContain(HOSTILE);
    expect(await page.textContent("#credential-table")).toContain(HOSTILE.slice(0, 60));
    await shot(page, "health");

    await page.click("nav a[data-view=requests]");
    await page.waitForSelector("#records-table");
    const records = (await gw.call("/v1/organizations/usage/records?limit=50", { token: rk })).body.records;
    expect(await page.locator("#records-table tbody tr").count()).toBe(records.length);
    expect(await page.locator("#records-table tbody tr").first().locator("td").nth(2).textContent()).toBe(records[0].lanes_tried.join(" → "));
    await page.selectOption("#filter-outcome", "error");
    await page.waitForFunction((n) => document.querySelectorAll("#records-table tbody tr").length === n,
      (await gw.call("/v1/organizations/usage/records?limit=50&outcome=error", { token: rk })).body.records.length);
    await shot(page, "requests");

    // The hostile strings never became markup: no <img>, no <script> from data, nothing ran.
    expect(await page.evaluate(() => (window as any).__pwned)).toBeUndefined();
    expect(await page.locator("main img, main script").count()).toBe(0);
    // CSP on the page and every file it loaded, and the token only in this tab's sessionStorage.
    for (const path of ["/dashboard", "/dashboard/assets/app.js", "/dashboard/assets/style.css", "/dashboard/assets/vendor/chart.umd.min.js", "/dashboard/assets/views/overview.js"]) {
      expect([path, cspByPath.get(path)]).toEqual([path, DASHBOARD_CSP]);
    }
    expect(DASHBOARD_CSP).toContain("script-src 'self'");
    expect(DASHBOARD_CSP).not.toContain("unsafe-inline");
    expect(await page.evaluate(() => [localStorage.length, document.cookie, location.href.includes("rk_")])).toEqual([0, "", false]);
    expect(await page.evaluate(() => sessionStorage.getItem("gateway.dashboard.token"))).toBe(rk);
    await page.close();
  }, 60_000);

  test("sk_: create a key (raw key shown once and working), change its budget, revoke it — each confirmed by the API", async () => {
    const page = await newPage();
    await signIn(page, acct.token);
    await page.waitForSelector("#totals");
    await page.click("nav a[data-view=keys]");
    await page.waitForSelector("#create-key");
    await page.fill("#create-key input[name=label]", "made-in-browser");
    await page.fill("#create-key input[name=monthly_budget_usd]", "12.5");
    await page.click("#create-key button[type=submit]");
    const raw = (await page.waitForSelector("#raw-key")).textContent();
    const rawKey = (await raw)!;
    expect(rawKey).toMatch(/^gw_/);
    const list = async () => (await gw.call("/v1/organizations/routing-keys", { token: acct.token })).body.routing_keys as any[];
    const made = (await list()).find((k) => k.label === "made-in-browser");
    expect([made.monthly_budget_usd, made.revoked_at, rawKey.startsWith(made.key_prefix)]).toEqual([12.5, null, true]);
    expect((await gw.call("/v1/key", { token: rawKey })).body.id).toBe(made.id);
    await shot(page, "keys-created");

    const card = page.locator(`article[data-key="${made.id}"]`);
    await card.locator("input[name=budget]").fill("30");
    await card.locator(".budget-form button").click();
    await page.waitForFunction((id) => document.querySelector(`article[data-key="${id}"] [data-field=budget]`)?.textContent === "$30.00", made.id);
    expect((await list()).find((k) => k.id === made.id).monthly_budget_usd).toBe(30);

    await page.locator(`article[data-key="${made.id}"] button[data-action=revoke]`).click();
    await page.waitForSelector(`article[data-key="${made.id}"] [data-state=revoked]`);
    expect((await list()).find((k) => k.id === made.id).revoked_at).not.toBeNull();
    expect((await gw.call("/v1/key", { token: rawKey })).status).toBe(401);
    await shot(page, "keys-after-actions");

    // Reorder lanes: the second lane goes first, and the API shows the new order.
    const prod = (await list()).find((k) => k.label === "agents-prod");
    const prodCard = page.locator(`article[data-key="${prod.id}"]`);
    await prodCard.locator("summary").click();
    await prodCard.locator(".lane-editor li").nth(1).locator("button[title='Move up']").click();
    await prodCard.locator("button", { hasText: "Save lanes" }).click();
    await page.waitForFunction((id) => document.querySelector(`article[data-key="${id}"] ol.lanes li`)?.textContent?.startsWith("openai"), prod.id);
    expect((await list()).find((k) => k.id === prod.id).providers.map((l: any) => l.provider)).toEqual(["openai", "anthropic"]);
    await page.close();
  }, 60_000);

  test("narrow screen: the overview fits a 390 px wide phone without sideways scrolling", async () => {
    const page = await newPage(390, 844);
    await signIn(page, rk);
    await page.waitForSelector("#totals");
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
    await shot(page, "overview-narrow");
    await page.close();
  }, 30_000);

  test("SPEC account plan: while unpaid the dashboard shows the deadline and the checkout link instead of the views", async () => {
    const unpaid = await createAccount(gw, { plan: "free" });
    const me = (await gw.call("/v1/organizations/me", { token: unpaid.token })).body;
    const page = await newPage();
    await signIn(page, unpaid.token);
    await page.waitForSelector("#payment:not([hidden])");
    expect(await page.isHidden("#nav")).toBe(true);
    expect(await page.isHidden("#view")).toBe(true);
    expect(await page.getAttribute("#payment-link", "href")).toBe(me.payment.checkout_url);
    expect(await page.textContent("#payment-deadline")).toBe(new Date(me.payment.account_expires_at).toISOString().replace("T", " ").slice(0, 19) + " UTC");
    expect(await page.textContent("#payment-message")).toBe(me.message);
    await shot(page, "payment");
    await page.close();
  }, 30_000);

  test("no console errors in any view, a wrong token is refused on the page, and no token reached the logs", async () => {
    const page = await newPage();
    await signIn(page, "sk_not_a_real_token");
    await page.waitForSelector("#notice.error");
    expect(await page.textContent("#notice")).toContain("unknown or was revoked");
    expect(await page.evaluate(() => sessionStorage.length)).toBe(0);
    await page.close();
    // The only failed load is the refused token's 401, which the browser logs as a network line, not a script error.
    expect(failedResponses).toEqual(["401 /v1/organizations/me"]);
    expect(consoleErrors.filter((e) => !e.includes("status of 401"))).toEqual([]);
    const logs = gw.logs.join("");
    for (const t of [rk, acct.token]) expect(logs.includes(t)).toBe(false);
  }, 30_000);
});
