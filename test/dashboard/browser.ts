// Debian's chromium driven by playwright-core (no browser download; the machine has no internet).
import { existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { chromium, type Browser, type Page } from "playwright-core";

export const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
export const OUTPUT_DIR = join(import.meta.dir, "..", "..", "test-output", "dashboard");

export const chromiumAvailable = () => existsSync(CHROMIUM);

export async function launchChromium(): Promise<Browser> {
  mkdirSync(OUTPUT_DIR, { recursive: true });
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
      "--disable-component-update", "--disable-sync"],
  });
}

/** The page's own money formatter (dom.js fmt.usd) applied to `n`, in the page. */
export function pageUsd(page: Page, n: number): Promise<string> {
  return page.evaluate(({ path, x }) => import(path).then((m: any) => m.fmt.usd(x) as string), { path: "/dashboard/assets/dom.js", x: n });
}
