// Vendor facts live with their vendor: no vendor host is written anywhere in src/ outside
// src/providers/, so adding or moving a vendor touches one folder.
import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { DEFAULT_PROVIDER_BASE_URLS, DEFAULT_SUB_API_BASE_URL, DEFAULT_SUB_AUTH_BASE_URL } from "../../src/providers/endpoints.ts";

const SRC = join(import.meta.dir, "../../src");

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    return statSync(p).isDirectory() ? files(p) : p.endsWith(".ts") ? [p] : [];
  });
}

describe("DESIGN convention 1: no vendor constant outside providers/", () => {
  test("no vendor host appears in src/ outside src/providers/", () => {
    const hosts = [...Object.values(DEFAULT_PROVIDER_BASE_URLS), DEFAULT_SUB_API_BASE_URL, DEFAULT_SUB_AUTH_BASE_URL].map((u) => new URL(u).hostname);
    expect(hosts.length).toBeGreaterThan(10);
    const outside = files(SRC).filter((f) => !f.startsWith(join(SRC, "providers") + "/"));
    expect(outside.length).toBeGreaterThan(20);
    const found: string[] = [];
    for (const f of outside) {
      const text = readFileSync(f, "utf8");
      for (const h of hosts) if (text.includes(h)) found.push(`${f.slice(SRC.length + 1)}: ${h}`);
    }
    expect(found).toEqual([]);
  });

  test("every provider's base URL override is named after its id and validated at start", async () => {
    const { ConfigError, loadConfig } = await import("../../src/config.ts");
    expect(loadConfig({ PROVIDER_MISTRAL_BASE_URL: "http://127.0.0.1:9/v1" }).providerBaseUrls.mistral).toBe("http://127.0.0.1:9/v1");
    expect(() => loadConfig({ PROVIDER_COHERE_BASE_URL: "not a url" })).toThrow(ConfigError);
    expect(() => loadConfig({ PROVIDER_COHERE_BASE_URL: "not a url" })).toThrow(/PROVIDER_COHERE_BASE_URL/);
  });
});
