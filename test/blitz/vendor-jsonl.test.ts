// The results reader every vendor batch client reads JSONL with (src/blitz/vendor/vendor-call.ts):
// lines as they arrive, across any chunking, garbage and over-long lines left out, never the whole
// file held; and a vendor's error text without the key the call carried.
import { describe, expect, test } from "bun:test";
import { callVendor, jsonlLines, VendorBatchError } from "../../src/blitz/vendor/vendor-call.ts";
import { serveLoopback } from "../mocks/scaffold.ts";

const chunked = (parts: string[]) => new Response(new ReadableStream({
  start(c) {
    for (const p of parts) c.enqueue(new TextEncoder().encode(p));
    c.close();
  },
}));

describe("vendor batch results JSONL", () => {
  test("lines split anywhere across chunks (a multi-byte character too), CRLF ends and a last line without its newline all come through, in order", async () => {
    const text = '{"a":1}\r\n{"b":"é€"}\n\n{"c":3}';
    const bytes = new TextEncoder().encode(text);
    for (let cut = 1; cut < bytes.length; cut++) {
      const res = new Response(new ReadableStream({
        start(c) { c.enqueue(bytes.slice(0, cut)); c.enqueue(bytes.slice(cut)); c.close(); },
      }));
      expect(await Array.fromAsync(jsonlLines(res))).toEqual([{ a: 1 }, { b: "é€" }, { c: 3 }]);
    }
  });

  test("a line that is not JSON, and a line past 16 MB, are left out; the lines around them are read", async () => {
    const long = `{"x":"${"y".repeat(17 * 1024 * 1024)}"}`;
    const parts = ['{"a":1}\n{"custom_id": "0", "resp', "\n", "not json\n", long.slice(0, 9_000_000), long.slice(9_000_000), '\n{"b":2}\n'];
    expect(await Array.fromAsync(jsonlLines(chunked(parts)))).toEqual([{ a: 1 }, { b: 2 }]);
  });

  test("a vendor's error names its status and words, never the key it was called with", async () => {
    const key = "sk-live-0123456789abcdefghijklmnop";
    const server = serveLoopback({ fetch: (req) => Response.json({ error: { message: `Incorrect API key provided: ${req.headers.get("authorization")?.slice(7)}` } }, { status: 401 }) });
    try {
      const e = await callVendor("OpenAI", `${server.origin}/v1/batches`, { headers: { authorization: `Bearer ${key}` } }).then(() => null, (x) => x);
      expect(e).toBeInstanceOf(VendorBatchError);
      expect(e.status).toBe(401);
      expect(e.permanent).toBe(true);
      expect(e.message).toContain("OpenAI batch call /v1/batches answered 401");
      expect(e.message).not.toContain(key);
      expect(e.message).not.toContain(key.slice(8, 24));
    } finally {
      await server.stop();
    }
  });
});
