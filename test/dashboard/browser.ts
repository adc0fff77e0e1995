// Debian's chromium driven by playwright-core (no browser download; the machine has no internet).
import { existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { chromium, type Browser } from "playwright-core";

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
