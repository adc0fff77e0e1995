// The topology settings of CONTRACT §2: one way to reach Redis (URL, Sentinels or Cluster nodes),
// host:port lists checked at start, and DATABASE_DIRECT_URL only beside a DATABASE_URL.
import { describe, expect, test } from "bun:test";
import { ConfigError, loadConfig } from "../../src/config.ts";
import { describeRedis } from "../../src/store/kv/connect.ts";

describe("CONTRACT §2: Redis and Postgres topology settings", () => {
  test("REDIS_SENTINELS + REDIS_SENTINEL_MASTER (+ REDIS_PASSWORD) select Sentinel mode; IPv6 hosts in brackets", () => {
    const c = loadConfig({ REDIS_SENTINELS: "10.0.0.1:26379, [::1]:26380,sentinel-c:26381", REDIS_SENTINEL_MASTER: "mymaster", REDIS_PASSWORD: "s3cret" });
    expect(c.redis).toEqual({ mode: "sentinel", name: "mymaster", password: "s3cret", sentinels: [{ host: "10.0.0.1", port: 26379 }, { host: "::1", port: 26380 }, { host: "sentinel-c", port: 26381 }] });
    expect(describeRedis(c.redis!)).toBe("sentinel mymaster via 10.0.0.1:26379,[::1]:26380,sentinel-c:26381");
    expect(describeRedis(c.redis!)).not.toContain("s3cret");
  });

  test("REDIS_CLUSTER_NODES selects Cluster mode; REDIS_URL the single-node mode; nothing the in-process KV", () => {
    expect(loadConfig({ REDIS_CLUSTER_NODES: "a:7000,b:7001" }).redis).toEqual({ mode: "cluster", nodes: [{ host: "a", port: 7000 }, { host: "b", port: 7001 }], password: undefined });
    expect(loadConfig({ REDIS_URL: "redis://:pw@h:6379" }).redis).toEqual({ mode: "url", url: "redis://:pw@h:6379" });
    expect(describeRedis(loadConfig({ REDIS_URL: "redis://:pw@h:6379" }).redis!)).toBe("redis://h:6379");
    expect(loadConfig({}).redis).toBeNull();
  });

  test.each([
    [{ REDIS_URL: "redis://h", REDIS_CLUSTER_NODES: "a:1" }, /set one way to reach Redis/],
    [{ REDIS_URL: "redis://h", REDIS_SENTINELS: "a:1", REDIS_SENTINEL_MASTER: "m" }, /set one way to reach Redis/],
    [{ REDIS_SENTINELS: "a:26379" }, /REDIS_SENTINEL_MASTER: required/],
    [{ REDIS_SENTINEL_MASTER: "m" }, /without REDIS_SENTINELS/],
    [{ REDIS_CLUSTER_NODES: "a" }, /REDIS_CLUSTER_NODES: must be host:port/],
    [{ REDIS_CLUSTER_NODES: "a:99999" }, /REDIS_CLUSTER_NODES: must be host:port/],
    [{ REDIS_SENTINELS: " , ", REDIS_SENTINEL_MASTER: "m" }, /REDIS_SENTINELS: must name at least one/],
    [{ DATABASE_DIRECT_URL: "postgres://h/db" }, /DATABASE_DIRECT_URL: set without DATABASE_URL/],
    [{ DATABASE_URL: "postgres://h:6432/db", DATABASE_DIRECT_URL: "mysql://h/db" }, /DATABASE_DIRECT_URL: must be a postgres/],
  ])("a bad combination stops the start with a message naming the variable: %p", (env, msg) => {
    expect(() => loadConfig(env as Record<string, string>)).toThrow(ConfigError);
    expect(() => loadConfig(env as Record<string, string>)).toThrow(msg);
  });

  test("DATABASE_DIRECT_URL beside a pooled DATABASE_URL", () => {
    const c = loadConfig({ DATABASE_URL: "postgres://u@pgbouncer:6432/gw", DATABASE_DIRECT_URL: "postgres://u@postgres:5432/gw" });
    expect(c.DATABASE_DIRECT_URL).toBe("postgres://u@postgres:5432/gw");
  });
});
