import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { ConfigError, loadConfig } from "../../src/config.ts";
import { DEFAULT_PROVIDER_BASE_URLS } from "../../src/providers/endpoints.ts";

const root = join(import.meta.dir, "..", "..");

describe("configuration (CONTRACT §2)", () => {
  test("defaults: port 8080 on 0.0.0.0, ./data, BASE_URL and SITE_URL http://localhost:$PORT, 48 h unpaid lifetime", () => {
    const c = loadConfig({});
    expect(c.PORT).toBe(8080);
    expect(c.HOST).toBe("0.0.0.0");
    expect(c.DATA_DIR).toBe("./data");
    expect(c.baseUrl).toBe("http://localhost:8080");
    expect(c.siteUrl).toBe("http://localhost:8080");
    expect(c.UNPAID_ACCOUNT_TTL_SECONDS).toBe(172800);
    expect(c.SIGNUP_CODE_TTL_SECONDS).toBe(600);
    expect(c.SIGNUP_IP_LIMIT_PER_HOUR).toBe(20);
    expect(c.MEMBERSHIP_PRICE_USD).toBe(20);
    expect(c.ALLOW_PRIVATE_UPSTREAMS).toBe(false);
    expect(c.BRIDGE_HEALTH_INTERVAL_SECONDS).toBe(30);
    expect(c.DATABASE_URL).toBeUndefined();
    expect(c.REDIS_URL).toBeUndefined();
    expect(c.providerBaseUrls).toEqual(DEFAULT_PROVIDER_BASE_URLS);
  });

  test("PROVIDER_<ID>_BASE_URL overrides one vendor's upstream base", () => {
    const c = loadConfig({ PROVIDER_OPENAI_BASE_URL: "http://127.0.0.1:9/v1/", PROVIDER_GROQ_BASE_URL: "http://127.0.0.1:10" });
    expect(c.providerBaseUrls.openai).toBe("http://127.0.0.1:9/v1");
    expect(c.providerBaseUrls.groq).toBe("http://127.0.0.1:10");
    expect(c.providerBaseUrls.anthropic).toBe(DEFAULT_PROVIDER_BASE_URLS.anthropic);
  });

  test.each([
    ["PORT", "eighty"],
    ["DATABASE_URL", "mysql://x"],
    ["REDIS_URL", "http://x"],
    ["ALLOW_PRIVATE_UPSTREAMS", "maybe"],
    ["UNPAID_ACCOUNT_TTL_SECONDS", "-5"],
    ["PROVIDER_OPENAI_BASE_URL", "not a url"],
  ])("a bad %s is refused with a message naming the variable", (name, value) => {
    expect(() => loadConfig({ [name]: value })).toThrow(ConfigError);
    try { loadConfig({ [name]: value }); } catch (e) { expect((e as Error).message).toContain(name); }
  });

  test("a bad value stops the process at start, naming the variable", async () => {
    const p = Bun.spawn([process.execPath, "src/main.ts"], { cwd: root, env: { PATH: process.env.PATH ?? "", PORT: "eighty", DATA_DIR: "/tmp/gw-config-test" }, stderr: "pipe", stdout: "pipe" });
    const code = await p.exited;
    const err = await new Response(p.stderr).text();
    expect(code).toBe(2);
    expect(err).toContain("PORT");
  });

  test("a malformed GATEWAY_SECRET_KEY stops the process at start", async () => {
    const p = Bun.spawn([process.execPath, "src/main.ts"], { cwd: root, env: { PATH: process.env.PATH ?? "", PORT: "0", GATEWAY_SECRET_KEY: "short", DATA_DIR: "/tmp/gw-config-test" }, stderr: "pipe", stdout: "pipe" });
    const code = await p.exited;
    expect(code).toBe(2);
    expect(await new Response(p.stderr).text()).toContain("GATEWAY_SECRET_KEY");
  });
});
