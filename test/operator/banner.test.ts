// The startup announcement: URL, SDK base URL, stores, where mail goes and the next command;
// store passwords never printed.
import { describe, expect, test } from "bun:test";
import { bannerText, fetchConcurrencyWarning, startupFacts } from "../../src/banner.ts";
import { loadConfig } from "../../src/config.ts";
import { startTestGateway, storesLabel } from "../helpers/gateway.ts";

describe("startup banner", () => {
  test("names the URL, the SDK base URL (/v1), the stores, the outbox and the next command, without passwords", () => {
    const config = loadConfig({ PORT: "8080", DATA_DIR: "/srv/gw", DATABASE_URL: "postgres://app:s3cret@db:5432/gw", REDIS_URL: "redis://:hunter2@kv:6379" });
    const f = startupFacts(config, "http://localhost:8080", { database: "postgres", kv: "redis" });
    expect(f.sdkBaseUrl).toBe("http://localhost:8080/v1");
    expect(f.mail).toContain("/srv/gw/outbox");
    const text = bannerText(f);
    for (const s of ["http://localhost:8080", "/v1", "/docs", "postgres://db:5432/gw", "redis://kv:6379", "/srv/gw/outbox", "agent-signup"]) expect(text).toContain(s);
    expect(text).not.toContain("s3cret");
    expect(text).not.toContain("hunter2");
    // The next command is zsh-safe: the URL with `?` is quoted.
    expect(f.next).toContain("'http://localhost:8080/api/auth?action=agent-signup'");
  });

  test(`without a terminal: one structured "gateway ready" line with the same facts (${storesLabel})`, async () => {
    const gw = await startTestGateway();
    try {
      const lines = gw.logs.flatMap((c) => c.split("\n")).filter(Boolean).map((l) => JSON.parse(l));
      const ready = lines.filter((l) => l.msg === "gateway ready");
      expect(ready.length).toBe(1);
      expect(ready[0].sdk_base_url).toBe(`${ready[0].url}/v1`);
      expect(ready[0].mail).toContain("outbox");
      expect(ready[0]).toHaveProperty("database");
      expect(ready[0]).toHaveProperty("kv");
    } finally {
      await gw.stop();
    }
  }, 60_000);

  test("warns at boot when Bun's fetch ceiling (BUN_CONFIG_MAX_HTTP_REQUESTS) is unset or low, not when raised", () => {
    const unset = fetchConcurrencyWarning({});
    expect(unset?.value).toBe(256);
    expect(unset?.message).toContain("BUN_CONFIG_MAX_HTTP_REQUESTS=65535");
    expect(fetchConcurrencyWarning({ BUN_CONFIG_MAX_HTTP_REQUESTS: "512" })?.value).toBe(512);
    expect(fetchConcurrencyWarning({ BUN_CONFIG_MAX_HTTP_REQUESTS: "not a number" })?.value).toBe(256);
    expect(fetchConcurrencyWarning({ BUN_CONFIG_MAX_HTTP_REQUESTS: "65535" })).toBeNull();
    expect(fetchConcurrencyWarning({ BUN_CONFIG_MAX_HTTP_REQUESTS: "4096" })).toBeNull();
  });
});
