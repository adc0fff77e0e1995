// Debian's chromium driven by playwright-core (no browser download; the machine has no internet).
import { existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { chromium, type Browser, type Page } from "playwright-core";

// Page-side globals inside page.evaluate callbacks (the tests are not compiled against the DOM lib).
declare const document: any, getComputedStyle: any;

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

/** Everything that sticks out sideways: the document, any element past the viewport, any box or cell whose content is wider than it. */
export function overflow(page: Page) {
  return page.evaluate(() => {
    const vw = document.documentElement.clientWidth;
    const name = (el: any) => `${el.tagName.toLowerCase()}${el.id ? `#${el.id}` : ""}${el.className && typeof el.className === "string" ? `.${el.className.trim().split(/\s+/).join(".")}` : ""}`;
    const bad: string[] = [];
    if (document.documentElement.scrollWidth > vw) bad.push(`document scrollWidth ${document.documentElement.scrollWidth} > clientWidth ${vw}`);
    for (const el of document.querySelectorAll("body *")) {
      const r = el.getBoundingClientRect();
      if (r.width === 0 && r.height === 0) continue;
      if (r.width > vw + 0.5 || r.right > vw + 0.5 || r.left < -0.5) bad.push(`${name(el)} spans ${Math.round(r.left)}..${Math.round(r.right)} of ${vw}`);
      const cs = getComputedStyle(el);
      const clips = ["auto", "scroll", "hidden", "clip"].includes(cs.overflowX);
      if ((clips || el.tagName === "TD" || el.tagName === "TH") && el.scrollWidth > el.clientWidth + 1) bad.push(`${name(el)} content ${el.scrollWidth} > box ${el.clientWidth}`);
    }
    return bad;
  });
}
