// Upstream bodies read with a ceiling (src/net/read-capped.ts), against a real HTTP server on
// loopback: a declared length within the cap reads as it is, one past it is refused before a byte
// is read, a chunked body is given up once it passes the cap, and so is a small gzip body that
// inflates past it (its declared length is the compressed size).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { gzipSync } from "node:zlib";
import { BodyTooLarge, readJsonCapped, readTextCapped } from "../../src/net/read-capped.ts";

describe("upstream bodies with a ceiling", () => {
  let server: ReturnType<typeof Bun.serve>;
  const url = (path: string) => `http://127.0.0.1:${server.port}${path}`;
  const bomb = gzipSync(Buffer.from("b".repeat(8 * 1024 * 1024)));

  beforeAll(() => {
    server = Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      fetch(req) {
        const path = new URL(req.url).pathname;
        if (path === "/small") return Response.json({ ok: "ünï" });
        if (path === "/declared") return new Response("x".repeat(4096), { headers: { "content-type": "text/plain" } });
        if (path === "/gzip") return new Response(bomb, { headers: { "content-encoding": "gzip" } });
        // Chunked: a stream of 64 kB pieces, 2 MB in all.
        let n = 0;
        return new Response(new ReadableStream({
          pull(c) {
            if (n++ === 32) return c.close();
            c.enqueue(new Uint8Array(64 * 1024).fill(99));
          },
        }));
      },
    });
  }, 10_000);
  afterAll(() => server.stop(true), 10_000);

  test("a body within the cap reads whole, declared or chunked, UTF-8 decoded", async () => {
    expect(await readJsonCapped(await fetch(url("/small")), 1024)).toEqual({ ok: "ünï" });
    expect((await readTextCapped(await fetch(url("/chunked")), 4 * 1024 * 1024)).length).toBe(2 * 1024 * 1024);
    expect((await readTextCapped(await fetch(url("/gzip")), 16 * 1024 * 1024)).length).toBe(8 * 1024 * 1024);
  });

  test("a declared length past the cap is refused before the body is read", async () => {
    await expect(readTextCapped(await fetch(url("/declared")), 4095)).rejects.toBeInstanceOf(BodyTooLarge);
  });

  test("a chunked body is given up once it passes the cap", async () => {
    await expect(readTextCapped(await fetch(url("/chunked")), 1024 * 1024)).rejects.toThrow("larger than 1 MiB");
  });

  test("a gzip body that inflates past the cap is given up, though its declared length is small", async () => {
    const res = await fetch(url("/gzip"));
    expect(Number(res.headers.get("content-length"))).toBeLessThan(64 * 1024);
    await expect(readTextCapped(res, 1024 * 1024)).rejects.toBeInstanceOf(BodyTooLarge);
  });
});
