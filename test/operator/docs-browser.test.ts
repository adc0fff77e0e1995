// The API reference page in a real browser (Debian's chromium, headless, no network beyond
// loopback): it renders the management operations from /openapi.json with no console errors
// (a Content-Security-Policy violation or a failed load would be one). Browser tests run once,
// against the embedded stores: the page does not touch the database.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { chromium, type Browser } from "playwright-core";
import { REAL_STORES, startTestGateway, type TestGateway } from "../helpers/gateway.ts";

const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
const FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"];

let gw: TestGateway;
let browser: Browser;
beforeAll(async () => {
  if (REAL_STORES) return;
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: install Debian's chromium (apt-get install -y chromium); .ci/run does.`);
  gw = await startTestGateway();
  browser = await chromium.launch({ executablePath: CHROMIUM, args: FLAGS });
}, 60_000);
afterAll(async () => {
  await browser?.close();
  await gw?.stop();
}, 60_000);

describe.skipIf(REAL_STORES)("API reference page in a browser (runs in the embedded-store pass only: the page reads no store)", () => {
  test("/docs lists the management operations, with no console errors and nothing loaded from elsewhere", async () => {
    const page = await browser.newPage();
    const errors: string[] = [];
    const foreign: string[] = [];
    page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });
    page.on("pageerror", (e) => errors.push(e.message));
    page.on("response", (r) => { if (r.status() >= 400) errors.push(`${r.status()} ${r.url()}`); });
    page.on("request", (r) => { if (!r.url().startsWith(gw.url) && !r.url().startsWith("data:") && !r.url().startsWith("blob:")) foreign.push(r.url()); });
    await page.goto(`${gw.url}/docs`, { waitUntil: "load" });
    for (const summary of ["Create a routing key", "Change a routing key", "Save a provider API key", "Register a bridge", "Connect the subscription sign-in", "Create an account token", "Usage of the last 30 days"]) {
      await page.getByText(summary, { exact: true }).first().waitFor({ timeout: 30_000 });
    }
    await page.waitForTimeout(300);
    expect(errors).toEqual([]);
    expect(foreign).toEqual([]);
    await page.close();
  }, 90_000);
});
