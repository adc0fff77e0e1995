// CONTRACT §7 (outages answer fast) without a timer per Redis command: the reply deadline is one
// watchdog per connection (src/store/kv/reply-watchdog.ts). A redis-server of the test's own is
// frozen (SIGSTOP) and thawed by PID; real stores only.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { REAL_STORES } from "../helpers/gateway.ts";
import { startPrivateRedis, type PrivateRedis } from "../helpers/private-redis.ts";
import { createServer, type AddressInfo } from "node:net";
import Redis from "ioredis";
import { COMMAND_TIMEOUT_MS, RedisKV } from "../../src/store/kv/redis.ts";
import { watchReplies } from "../../src/store/kv/reply-watchdog.ts";

const name = REAL_STORES ? "Redis reply deadline (own redis-server)" : "Redis reply deadline: skipped in embedded mode (needs a real redis-server to freeze)";

describe.if(REAL_STORES)(name, () => {
  let redis: PrivateRedis;
  let kv: RedisKV;
  beforeAll(async () => {
    redis = await startPrivateRedis();
    kv = new RedisKV(redis.url);
    await kv.ping();
  }, 60_000);
  afterAll(async () => {
    redis?.thaw();
    await kv?.close();
    await redis?.stop();
  }, 60_000);

  test("CONTRACT §7: commands on the hot path arm no timer of their own (the deadline is one watchdog per connection)", async () => {
    const original = globalThis.setTimeout;
    let armed = 0;
    globalThis.setTimeout = Object.assign((...a: Parameters<typeof setTimeout>) => { armed++; return original(...a); }, original) as typeof setTimeout;
    try {
      await Promise.all(Array.from({ length: 200 }, (_, i) => kv.set(`deadline:${i}`, "1", 60)));
      for (let i = 0; i < 50; i++) await kv.getNumber(`deadline:${i}`);
    } finally {
      globalThis.setTimeout = original;
    }
    expect(armed).toBe(0);
  });

  test("CONTRACT §7: a frozen Redis fails every waiting command about the deadline after it was sent, and commands succeed again once it answers", async () => {
    redis.freeze();
    let results: Array<{ ok: boolean; ms: number }>;
    try {
      const t = performance.now();
      results = await Promise.all(Array.from({ length: 5 }, () => kv.getNumber("deadline:1").then(() => ({ ok: true, ms: performance.now() - t }), () => ({ ok: false, ms: performance.now() - t }))));
      // While the connection is being re-established to a Redis that still does not answer, a
      // command fails at once rather than waiting.
      const again = performance.now();
      const next = await kv.getNumber("deadline:2").then(() => true, () => false);
      expect(next).toBe(false);
      expect(performance.now() - again).toBeLessThan(COMMAND_TIMEOUT_MS * 4);
    } finally {
      redis.thaw();
    }
    expect(results.every((r) => !r.ok)).toBe(true);
    // Not before the deadline's first check; well within a bound a loaded machine keeps.
    for (const r of results) {
      expect(r.ms).toBeGreaterThanOrEqual(COMMAND_TIMEOUT_MS / 2);
      expect(r.ms).toBeLessThan(3000);
    }
    let back = false;
    for (let i = 0; i < 50 && !back; i++) {
      back = await kv.getNumber("deadline:3").then(() => true, () => false);
      if (!back) await Bun.sleep(100);
    }
    expect(back).toBe(true);
  }, 20_000);
});

// A server of the test's own that speaks just enough RESP: a GET is answered with one bulk reply of
// REPLY_BYTES sent in pieces a little apart (`paced`), or never (`frozen`); anything else with OK.
describe("the reply watchdog tells a reply still arriving from a Redis that does not answer", () => {
  const REPLY_BYTES = 400_000;
  const PIECES = 16;
  async function fakeRedis(mode: "paced" | "frozen") {
    // node:net, whose writes are buffered until the socket takes them (every piece arrives whole).
    const server = createServer((socket) => {
      let pending = Buffer.alloc(0);
      // Replies go out in command order: each waits for the one before it.
      let last = Promise.resolve();
      socket.on("data", (chunk: Buffer) => {
        pending = Buffer.concat([pending, chunk]);
        for (let cmd = nextCommand(); cmd; cmd = nextCommand()) {
          const name = cmd;
          last = last.then(() => reply(name));
        }
      });
      socket.on("error", () => {});
      /** The name of the next whole command in `pending` (RESP arrays of bulk strings), consumed; null until one is whole. */
      function nextCommand(): string | null {
        const text = pending.toString("latin1");
        const m = /^\*(\d+)\r\n/.exec(text);
        if (!m) return null;
        let at = m[0].length;
        const parts: string[] = [];
        for (let i = 0; i < Number(m[1]); i++) {
          const b = /^\$(\d+)\r\n/.exec(text.slice(at));
          if (!b || text.length < at + b[0].length + Number(b[1]) + 2) return null;
          parts.push(text.slice(at + b[0].length, at + b[0].length + Number(b[1])));
          at += b[0].length + Number(b[1]) + 2;
        }
        pending = pending.subarray(at);
        return parts[0]!.toLowerCase();
      }
      async function reply(name: string): Promise<void> {
        if (name !== "get") {
          socket.write("+OK\r\n");
          return;
        }
        if (mode === "frozen") return new Promise(() => {});
        const body = Buffer.concat([Buffer.from(`$${REPLY_BYTES}\r\n`), Buffer.alloc(REPLY_BYTES, 120), Buffer.from("\r\n")]);
        const size = Math.ceil(body.length / PIECES);
        // Over about 1.5 s in all, three times the 500 ms deadline, a piece every 100 ms.
        for (let i = 0; i < PIECES; i++) {
          socket.write(body.subarray(i * size, (i + 1) * size));
          await new Promise((r) => setTimeout(r, 100));
        }
      }
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const port = (server.address() as AddressInfo).port;
    const conn = new Redis({ host: "127.0.0.1", port, enableReadyCheck: false, maxRetriesPerRequest: 0, enableOfflineQueue: true, retryStrategy: () => null });
    conn.on("error", () => {});
    const stop = watchReplies(conn, COMMAND_TIMEOUT_MS);
    return { conn, close: () => { stop(); conn.disconnect(); server.close(); } };
  }

  test("CONTRACT §7: a reply that keeps arriving for three times the deadline is received whole; the connection is not dropped", async () => {
    const f = await fakeRedis("paced");
    try {
      const t = performance.now();
      const got = await f.conn.get("big");
      expect(got?.length).toBe(REPLY_BYTES);
      expect(performance.now() - t).toBeGreaterThan(COMMAND_TIMEOUT_MS * 2);
    } finally {
      f.close();
    }
  }, 20_000);

  test("CONTRACT §7: a server that sends nothing back still fails the command about the deadline after it was sent", async () => {
    const f = await fakeRedis("frozen");
    try {
      const t = performance.now();
      const err = await f.conn.get("big").then(() => null, (e: Error) => e);
      expect(err?.message).toMatch(/Connection is closed/);
      expect(performance.now() - t).toBeLessThan(3000);
    } finally {
      f.close();
    }
  }, 20_000);
});
