// The dashboard's files as the gateway serves them: strict CSP and no-sniff on each, nothing from
// another origin, no way to write data as HTML in the page's code, unknown files 404.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { startTestGateway, storesLabel, type TestGateway } from "../helpers/gateway.ts";
import { DASHBOARD_CSP } from "../../src/dashboard/routes.ts";

let gw: TestGateway;
beforeAll(async () => { gw = await startTestGateway(); }, 60_000);
afterAll(async () => { await gw?.stop(); }, 60_000);

const PUBLIC = join(import.meta.dir, "..", "..", "src", "dashboard", "public");
const sources = (dir = PUBLIC): string[] =>
  readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? sources(join(dir, e.name)) : [join(dir, e.name)]));

describe(`dashboard files (${storesLabel})`, () => {
  test("GET /dashboard and every file it loads answer with the strict CSP (script-src 'self', no inline), nosniff, no-referrer and frame-ancestors 'none'", async () => {
    const page = await gw.req("/dashboard");
    expect(page.status).toBe(200);
    expect(page.headers.get("content-type")).toBe("text/html; charset=utf-8");
    const html = await page.text();
    const refs = [...html.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]!).filter((u) => !u.startsWith("#"));
    expect(refs.length).toBeGreaterThanOrEqual(4);
    // Nothing from another origin: the browser may have no internet.
    expect(refs.filter((u) => !u.startsWith("/dashboard/assets/"))).toEqual([]);
    for (const path of ["/dashboard", ...refs, "/dashboard/assets/views/keys.js"]) {
      const r = await gw.req(path);
      expect([path, r.status]).toEqual([path, 200]);
      expect(r.headers.get("content-security-policy")).toBe(DASHBOARD_CSP);
      expect(r.headers.get("x-content-type-options")).toBe("nosniff");
      expect(r.headers.get("referrer-policy")).toBe("no-referrer");
      await r.arrayBuffer();
    }
    expect(DASHBOARD_CSP).toContain("script-src 'self'");
    expect(DASHBOARD_CSP).toContain("frame-ancestors 'none'");
    expect(DASHBOARD_CSP).not.toMatch(/unsafe-inline|unsafe-eval|https?:|\*/);
  });

  test("a file is revalidated by its ETag (304), an unknown one is 404 in the flat shape, other methods 405", async () => {
    const first = await gw.req("/dashboard/assets/app.js");
    const etag = first.headers.get("etag")!;
    expect(etag).toMatch(/^"/);
    expect((await gw.req("/dashboard/assets/app.js", { headers: { "if-none-match": etag } })).status).toBe(304);
    const missing = await gw.call("/dashboard/assets/../../src/config.ts");
    expect(missing.status).toBe(404);
    expect(missing.body.code).toBe("not_found");
    const post = await gw.call("/dashboard", { method: "POST", body: {} });
    expect([post.status, post.body.code]).toEqual([405, "method_not_allowed"]);
  });

  test("the page's code never writes HTML from strings and keeps the token out of URLs and persistent storage", () => {
    for (const file of sources().filter((f) => f.endsWith(".js") || f.endsWith(".html"))) {
      const src = readFileSync(file, "utf8");
      expect([file, src.match(/innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\(|new Function/g)]).toEqual([file, null]);
      expect([file, src.match(/localStorage|document\.cookie/g)]).toEqual([file, null]);
      if (file.endsWith(".html")) expect([file, src.match(/<script>|\sstyle=|\son[a-z]+=/gi)]).toEqual([file, null]);
    }
  });
});
