// Lane cooldowns in the dashboard's keys view, in a real browser (CONTRACT §9 "Lane cooldowns"):
// a key's first lane keeps failing upstream with a 503 (a retryable cause) until it cools, with
// LANE_COOLDOWN_FAILURES low for this gateway; GET /v1/organizations/routing-keys then says
// `cooldown_until` on that lane (null on the other, which served), and the keys view shows the
// lane cooling until that time and the other ready. Runs once, in the embedded-defaults pass.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import type { Browser } from "playwright-core";
import { REAL_STORES } from "../helpers/gateway.ts";
import { addRoutingKey, lane, startRelayWorld, type RelayWorld } from "../helpers/relay-world.ts";
import { until } from "../helpers/until.ts";
import { chatBody } from "../relay/fixtures.ts";
import { chromiumAvailable, launchChromium, OUTPUT_DIR, overflow } from "./browser.ts";

const run = !REAL_STORES && chromiumAvailable();
const why = REAL_STORES ? " (runs once, in the embedded-defaults pass: skipped against the real stores)" : !chromiumAvailable() ? " (skipped: no /usr/bin/chromium; .ci/run installs it)" : "";

let w: RelayWorld<"openai" | "groq">;
let browser: Browser;
const pageErrors: string[] = [];

describe.skipIf(!run)(`dashboard lane cooldowns, in chromium${why}`, () => {
  beforeAll(async () => {
    // Two failures cool a lane, for ten minutes: long enough to be seen, whatever the machine's pace.
    w = await startRelayWorld({ providers: ["openai", "groq"], env: { LANE_COOLDOWN_FAILURES: "2", LANE_COOLDOWN_BASE_SECONDS: "600" } });
    browser = await launchChromium();
  }, 90_000);
  afterAll(async () => {
    await browser?.close();
    await w?.stop();
  }, 60_000);

  test("CONTRACT §9: a lane its upstream's 503s cooled shows in the keys view as cooling until its cooldown_until; the lane that served shows ready", async () => {
    const key = await addRoutingKey(w.gw, w.acct.id, { label: "cooling", lanes: [lane("openai", w.cred.openai.id), lane("groq", w.cred.groq.id)] });
    const failing = w.up.openai as { setDefault(b: Record<string, unknown>): void; received: unknown[] };
    failing.setDefault({ status: 503 });
    const lanesOf = async () => {
      const r = await w.gw.call("/v1/organizations/routing-keys", { token: w.acct.token });
      expect(r.status).toBe(200);
      return r.body.routing_keys.find((k: any) => k.id === key.id).providers as Array<{ provider: string; cooldown_until: string | null }>;
    };
    expect((await lanesOf()).map((l) => l.cooldown_until)).toEqual([null, null]);
    // Each request fails over to groq and is served; the openai lane's failures count toward its cooldown.
    const cooledAt = await until("the openai lane cooling", async () => {
      const r = await w.gw.call("/v1/chat/completions", { token: key.raw, body: chatBody() });
      expect(r.status).toBe(200);
      return (await lanesOf())[0]!.cooldown_until;
    }, 20_000, 50);
    const lanes = await lanesOf();
    expect(Date.parse(cooledAt)).toBeGreaterThan(Date.now());
    expect(lanes[1]!.cooldown_until).toBeNull();
    // The same view as the key's own GET /v1/key.
    expect((await w.gw.call("/v1/key", { token: key.raw })).body.lanes.map((l: any) => l.cooldown_until)).toEqual(lanes.map((l) => l.cooldown_until));
    // While it cools, requests skip it: nothing more reaches the failing upstream.
    const seen = failing.received.length;
    expect((await w.gw.call("/v1/chat/completions", { token: key.raw, body: chatBody() })).status).toBe(200);
    expect(failing.received.length).toBe(seen);

    // Read-only: the lanes as GET shows them go back in a PATCH as they are, and the cooldown stays.
    const patched = await w.gw.call(`/v1/organizations/routing-keys?id=${key.id}`, { method: "PATCH", token: w.acct.token, body: { providers: lanes } });
    expect(patched.status).toBe(200);
    expect(patched.body.providers.map((l: any) => l.cooldown_until)).toEqual(lanes.map((l) => l.cooldown_until));

    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    page.on("pageerror", (e) => pageErrors.push(String(e)));
    await page.goto(`${w.gw.url}/dashboard#keys`);
    await page.fill("#token", w.acct.token);
    await page.click("#sign-in-form button[type=submit]");
    await page.waitForSelector(`#view[data-view=keys][aria-busy=false] article[data-key="${key.id}"]`);
    const card = page.locator(`article[data-key="${key.id}"] ol.lanes`);
    const cooling = card.locator("li[data-lane='0'] [data-cooldown]");
    expect(await cooling.getAttribute("data-cooldown")).toBe(lanes[0]!.cooldown_until);
    const shown = new Date(lanes[0]!.cooldown_until!).toISOString().replace("T", " ").slice(0, 19);
    expect(await cooling.textContent()).toBe(`cooling until ${shown} UTC`);
    expect(await card.locator("li[data-lane='1'] [data-cooldown]").getAttribute("data-cooldown")).toBe("none");
    expect(await card.locator("li[data-lane='1'] [data-cooldown]").textContent()).toBe("ready");
    expect(await card.locator("li[data-lane='0']").textContent()).toStartWith("openai");
    await page.screenshot({ path: join(OUTPUT_DIR, "keys-lane-cooling.png"), fullPage: true });
    // It fits a phone too.
    await page.setViewportSize({ width: 360, height: 800 });
    expect(await overflow(page)).toEqual([]);
    await page.close();
    expect(pageErrors).toEqual([]);
  }, 90_000);
});
