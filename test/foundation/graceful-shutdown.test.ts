// Graceful shutdown, visibly (CONTRACT §7: none is lost on a graceful shutdown): on SIGTERM a
// gateway process answers /readyz 503 at once while the stream in flight runs to its end and its
// usage record is written; then the listener closes and the process exits 0. One store mode is
// enough (a process and its listener are what is tested): the embedded suite runs it.
import { describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { connect, type Socket } from "node:net";
import { eq } from "drizzle-orm";
import { startGateway } from "../../src/gateway.ts";
import { usageRecords } from "../../src/store/db/schema/index.ts";
import { createAccount, REAL_STORES } from "../helpers/gateway.ts";
import { seedPgliteDataDir } from "../helpers/template-db.ts";
import { startMockOpenAI } from "../mocks/openai-upstream.ts";
import { spawnGateway } from "../relay/child-gateway.ts";
import { addCredential, addRoutingKey, chatBody, lane } from "../relay/fixtures.ts";

const run = REAL_STORES ? describe.skip : describe;
const label = REAL_STORES ? "skipped on the real-stores suite: it tests the process, the embedded suite runs it" : "embedded database, gateway process";

run(`graceful shutdown (${label})`, () => {
  test("CONTRACT §7 SIGTERM: /readyz answers 503 at once while a stream in flight finishes and its usage is written; then the listener closes and the process exits 0", async () => {
    const mock = await startMockOpenAI();
    const dataDir = mkdtempSync(join(tmpdir(), "gw-sigterm-"));
    await seedPgliteDataDir(dataDir); // a migrated database, as the first start would leave it
    const env = { DATA_DIR: dataDir, GATEWAY_SECRET_KEY: randomBytes(32).toString("hex"), PROVIDER_OPENAI_BASE_URL: mock.url };
    const open = () => startGateway({ ...env, PORT: "0", HOST: "127.0.0.1", LOG_LEVEL: "silent" });
    try {
      const seed = await open();
      const a = await createAccount(seed);
      const c = await addCredential(seed, a.id, "openai");
      const key = await addRoutingKey(seed, a.id, { lanes: [lane("openai", c.id)] });
      await seed.stop();

      const child = await spawnGateway(env);
      expect((await fetch(child.url + "/readyz")).status).toBe(200);
      // 15 chunks 100 ms apart: the stream is still running for over a second after SIGTERM.
      const res = await fetch(child.url + "/v1/chat/completions", {
        method: "POST",
        headers: { authorization: `Bearer ${key.raw}`, "content-type": "application/json" },
        body: JSON.stringify(chatBody({ stream: true, stream_options: { include_usage: true }, mock: { chunks: 15, chunk_delay_ms: 100 } })),
      });
      expect(res.status).toBe(200);
      const reader = res.body!.getReader();
      let text = new TextDecoder().decode((await reader.read()).value);

      const exited = child.terminate();
      await Bun.sleep(100);
      const ready = await fetch(child.url + "/readyz");
      expect(ready.status).toBe(503);
      expect(((await ready.json()) as { draining: boolean }).draining).toBe(true);

      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        text += new TextDecoder().decode(value);
      }
      expect(text).toContain("data: [DONE]");
      expect(await exited).toBe(0);
      // It says when it has stopped, after the drain.
      expect(child.output()).toMatch(/"shutting down[\s\S]*"gateway stopped"/);
      // The listener is closed.
      expect(await fetch(child.url + "/healthz").then(() => "open", () => "closed")).toBe("closed");

      const reader2 = await open();
      try {
        const rows = await reader2.ctx.db.select().from(usageRecords).where(eq(usageRecords.routingKeyId, key.id));
        expect(rows).toHaveLength(1);
        expect(rows[0]!.status).toBe(200);
      } finally {
        await reader2.stop();
      }
    } finally {
      await mock.stop();
      rmSync(dataDir, { recursive: true, force: true });
    }
  }, 60_000);

  test("CONTRACT §7 shutdown: a client holding half a request head (never finished) does not hold the drain to SHUTDOWN_TIMEOUT_SECONDS; a request under way (its body still arriving) is still answered, with Connection: close", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "gw-halfhead-"));
    await seedPgliteDataDir(dataDir);
    const gw = await startGateway({ DATA_DIR: dataDir, GATEWAY_SECRET_KEY: randomBytes(32).toString("hex"), PORT: "0", HOST: "127.0.0.1", LOG_LEVEL: "silent", SHUTDOWN_TIMEOUT_SECONDS: "60" });
    const sockets: Socket[] = [];
    try {
      const open = async () => {
        const s = connect(gw.port, "127.0.0.1");
        sockets.push(s);
        await new Promise((r) => s.once("connect", r));
        return s;
      };
      // Half a head: Bun keeps such a connection for its idle timeout (255 s), and a graceful close waits for it.
      const stalled = await open();
      const closed = new Promise<void>((r) => stalled.once("close", () => r()));
      stalled.write("GET /healthz HTTP/1.1\r\nHost: x\r\n");
      // A request whose body is still arriving when the drain starts: in flight, answered.
      const slow = await open();
      let answer = "";
      slow.on("data", (d) => (answer += d.toString()));
      const slowClosed = new Promise<void>((r) => slow.once("close", () => r()));
      const acct = await createAccount(gw);
      const body = JSON.stringify({ label: "during the drain", providers: [] });
      slow.write(`POST /v1/organizations/routing-keys HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${acct.token}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body.slice(0, 10)}`);
      // In flight (its route runs, waiting for the rest of its body) before the drain starts.
      for (let i = 0; i < 500 && gw.ctx.services.requestTracker.inFlight < 1; i++) await Bun.sleep(10);
      expect(gw.ctx.services.requestTracker.inFlight).toBe(1);

      const t0 = performance.now();
      const stopping = gw.stop();
      await Bun.sleep(300);
      slow.write(body.slice(10));
      await stopping;
      expect(performance.now() - t0).toBeLessThan(5_000);
      await closed; // cut, not left open
      await Promise.race([slowClosed, Bun.sleep(5_000)]); // the answer, then the close it asked for
      expect(answer).toMatch(/^HTTP\/1\.1 [24]\d\d /); // answered after its body came, during the drain: not cut
      // Answers during the drain close their connection: a load balancer reuses none of them.
      expect(answer).toMatch(/\r\nconnection: close\r\n/i);
    } finally {
      for (const s of sockets) s.destroy();
      await gw.stop();
      rmSync(dataDir, { recursive: true, force: true });
    }
  }, 30_000);

  test("Ctrl-C: SIGINT drains; a second SIGINT during the drain stops at once (exit 130) and says so", async () => {
    const mock = await startMockOpenAI();
    const dataDir = mkdtempSync(join(tmpdir(), "gw-sigint-"));
    await seedPgliteDataDir(dataDir); // a migrated database, as the first start would leave it
    const env = { DATA_DIR: dataDir, GATEWAY_SECRET_KEY: randomBytes(32).toString("hex"), PROVIDER_OPENAI_BASE_URL: mock.url, SHUTDOWN_TIMEOUT_SECONDS: "120" };
    try {
      const seed = await startGateway({ ...env, PORT: "0", HOST: "127.0.0.1", LOG_LEVEL: "silent" });
      const a = await createAccount(seed);
      const c = await addCredential(seed, a.id, "openai");
      const key = await addRoutingKey(seed, a.id, { lanes: [lane("openai", c.id)] });
      await seed.stop();

      const child = await spawnGateway(env);
      // A stream that would run for a minute: the drain would wait for it.
      const res = await fetch(child.url + "/v1/chat/completions", {
        method: "POST",
        headers: { authorization: `Bearer ${key.raw}`, "content-type": "application/json" },
        body: JSON.stringify(chatBody({ stream: true, mock: { chunks: 600, chunk_delay_ms: 100 } })),
      });
      expect(res.status).toBe(200);
      const reader = res.body!.getReader();
      await reader.read();
      child.signal("SIGINT");
      // Draining: still running, readiness off.
      for (let i = 0; i < 100 && (await fetch(child.url + "/readyz")).status !== 503; i++) await Bun.sleep(20);
      expect((await fetch(child.url + "/readyz")).status).toBe(503);
      expect(child.output()).toContain("Ctrl-C again");
      child.signal("SIGINT");
      expect(await child.exited).toBe(130);
      expect(child.output()).toContain("second signal during the drain: stopping now");
      // At once: the stream was cut, not waited for (it never reached its end).
      let rest = "";
      for (;;) {
        const r = await reader.read().catch(() => ({ done: true, value: undefined }));
        if (r.done) break;
        rest += new TextDecoder().decode(r.value);
      }
      expect(rest).not.toContain("[DONE]");
    } finally {
      await mock.stop();
      rmSync(dataDir, { recursive: true, force: true });
    }
  }, 90_000);
});
