// The Budget alerts view in a real browser: an sk_ token sets thresholds, a webhook URL and an
// email through the page and GET /v1/organizations/budget-alerts confirms them; an invalid value
// shows the API's own 400 sentence; values are written as text; an rk_ token (which the API
// refuses writes) sees them read-only; the view fits 360, 1280 and 1920 px. Runs once, in the
// embedded-defaults pass (see dashboard.test.ts).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import type { Browser, Page } from "playwright-core";
import { addToken, createAccount, REAL_STORES, startTestGateway, type TestGateway } from "../helpers/gateway.ts";
import { chromiumAvailable, launchChromium, OUTPUT_DIR, overflow } from "./browser.ts";

const run = !REAL_STORES && chromiumAvailable();
const why = REAL_STORES ? " (runs once, in the embedded-defaults pass: skipped against the real stores)" : !chromiumAvailable() ? " (skipped: no /usr/bin/chromium; .ci/run installs it)" : "";
const PATH = "/v1/organizations/budget-alerts";
// Loopback is accepted because test gateways allow private upstreams; `&amp;` must reach the page as those five characters.
const HOOK = "http://127.0.0.1:9/hooks/budget?team=evals&amp;x=1";

let gw: TestGateway;
let browser: Browser;
let acct: { id: string; token: string; email: string };
let rk: string;
const pageErrors: string[] = [];

async function open(width: number, token: string): Promise<Page> {
  const page = await browser.newPage({ viewport: { width, height: 900 } });
  page.on("pageerror", (e) => pageErrors.push(String(e)));
  // The browser logs each 4xx answer as a console error; the 400 below is expected.
  page.on("console", (m) => { if (m.type() === "error" && !m.text().includes("status of 4")) pageErrors.push(m.text()); });
  await page.goto(`${gw.url}/dashboard#alerts`);
  await page.fill("#token", token);
  await page.click("#sign-in-form button[type=submit]");
  await page.waitForSelector("#view[data-view=alerts][aria-busy=false] #alert-settings");
  return page;
}

const settings = async () => (await gw.call(PATH, { token: rk })).body.budget_alerts;

async function submit(page: Page, values: { thresholds: string; url: string; email: string }) {
  await page.fill("#alerts-form [name=thresholds_percent]", values.thresholds);
  await page.fill("#alerts-form [name=webhook_url]", values.url);
  await page.fill("#alerts-form [name=email]", values.email);
  await page.click("#alerts-form button[type=submit]");
}

describe.skipIf(!run)(`dashboard budget alerts view, in chromium${why}`, () => {
  beforeAll(async () => {
    gw = await startTestGateway();
    acct = await createAccount(gw);
    rk = await addToken(gw, acct.id, "read_only");
    browser = await launchChromium();
  }, 90_000);
  afterAll(async () => {
    await browser?.close();
    await gw?.stop();
  }, 60_000);

  test("an sk_ token sets thresholds, webhook URL and email through the page; GET on the API returns them and the page shows them as text", async () => {
    expect(await settings()).toBeNull();
    const page = await open(1280, acct.token);
    expect(await page.textContent("#alert-settings [data-field=thresholds]")).toBe("off");
    await submit(page, { thresholds: "80, 50 100", url: HOOK, email: acct.email });
    await page.waitForSelector("#notice.ok");
    expect(await settings()).toMatchObject({ thresholds_percent: [50, 80, 100], webhook_url: HOOK, email: acct.email });
    await page.waitForSelector("#view[aria-busy=false] #alerts-off");
    expect(await page.textContent("#alert-settings [data-field=thresholds]")).toBe("50 %, 80 %, 100 %");
    expect(await page.textContent("#alert-settings [data-field=webhook_url]")).toBe(HOOK);
    expect(await page.textContent("#alert-settings [data-field=email]")).toBe(acct.email);
    // Text, never markup: the URL's "&amp;" is shown as typed and the cell holds no elements.
    expect(await page.locator("#alert-settings [data-field=webhook_url] *").count()).toBe(0);
    expect(await page.inputValue("#alerts-form [name=thresholds_percent]")).toBe("50, 80, 100");
    await page.screenshot({ path: join(OUTPUT_DIR, "alerts-sk.png"), fullPage: true });
    await page.close();
  }, 60_000);

  test("an invalid value shows the API's 400 sentence, and nothing changes", async () => {
    const before = await settings();
    const direct = await gw.call(PATH, { method: "POST", token: acct.token, body: { thresholds_percent: [150], webhook_url: HOOK, email: null } });
    expect(direct.status).toBe(400);
    expect(direct.body.error).toContain("thresholds_percent[0]");
    const page = await open(1280, acct.token);
    await submit(page, { thresholds: "150", url: HOOK, email: "" });
    await page.waitForSelector("#notice.error");
    expect(await page.textContent("#notice")).toBe(direct.body.error);
    // Neither destination: the API's sentence naming both fields.
    const none = await gw.call(PATH, { method: "POST", token: acct.token, body: { thresholds_percent: [50], webhook_url: null, email: null } });
    expect(none.status).toBe(400);
    await submit(page, { thresholds: "50", url: "", email: "" });
    await page.waitForFunction((text) => document.getElementById("notice")?.textContent === text, none.body.error);
    expect(await settings()).toEqual(before);
    await page.close();
  }, 60_000);

  test("an rk_ token (the API refuses its writes) sees the alerts read-only: values, no form", async () => {
    expect((await gw.call(PATH, { method: "POST", token: rk, body: { thresholds_percent: [10], email: acct.email } })).status).toBe(403);
    const page = await open(1280, rk);
    expect(await page.textContent("#alert-settings [data-field=webhook_url]")).toBe(HOOK);
    expect(await page.locator("#alerts-form").count()).toBe(0);
    expect(await page.locator("#alerts-read-only").count()).toBe(1);
    await page.close();
  }, 60_000);

  for (const width of [360, 1280, 1920]) {
    test(`layout: the view fits ${width} px with either token — document scrollWidth ≤ clientWidth, no element wider than the viewport`, async () => {
      for (const [name, token] of [["sk", acct.token], ["rk", rk]] as const) {
        const page = await open(width, token);
        expect([name, await overflow(page)]).toEqual([name, []]);
        expect([name, await page.textContent("#view")]).not.toEqual([name, expect.stringMatching(/\bnull\b|undefined|NaN/)]);
        await page.screenshot({ path: join(OUTPUT_DIR, `alerts-${name}-${width}.png`), fullPage: true });
        await page.close();
      }
    }, 60_000);
  }

  test("turning alerts off through the page: GET on the API answers null", async () => {
    const page = await open(1280, acct.token);
    await page.click("#alerts-off");
    await page.waitForSelector("#notice.ok");
    expect(await settings()).toBeNull();
    await page.waitForFunction(() => document.querySelector("#alert-settings [data-field=thresholds]")?.textContent === "off");
    await page.close();
  }, 60_000);

  test("no script errors on any page", () => {
    expect(pageErrors).toEqual([]);
  });
});

declare const document: any;
