// GET /dashboard: the operator's browser UI, served by the gateway process itself. Its files are
// plain ES modules committed under public/ (no build step); chart.js comes from node_modules.
// Everything is read into memory once at start. The page holds no data: it signs in with a
// pasted account token and reads the public management API, like any script would.
import { readdirSync, readFileSync, statSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, extname, join, relative } from "node:path";
import type { Elysia } from "elysia";
import type { Ctx } from "../context.ts";
import { mount, MANAGEMENT } from "../http/route.ts";
import type { RouteDocs } from "../http/openapi.ts";

/**
 * Strict: scripts and styles only from this origin (no inline code, no attribute styles, no CDN),
 * API calls only to this origin, nothing may frame the page, forms post nowhere.
 */
export const DASHBOARD_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self'",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join("; ");

const TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".map": "application/json; charset=utf-8",
  ".svg": "image/svg+xml",
};

const HEADERS = {
  "content-security-policy": DASHBOARD_CSP,
  "x-content-type-options": "nosniff",
  "x-frame-options": "DENY",
  "referrer-policy": "no-referrer",
  "cross-origin-opener-policy": "same-origin",
  // Small files, revalidated on each load so an upgraded gateway never runs a stale page.
  "cache-control": "no-cache",
};

interface Asset { body: Uint8Array; type: string; etag: string }

function asset(body: Uint8Array, path: string): Asset {
  return { body, type: TYPES[extname(path)] ?? "application/octet-stream", etag: `"${Bun.hash(body).toString(36)}"` };
}

function walk(dir: string, out: string[] = []): string[] {
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) walk(p, out);
    else out.push(p);
  }
  return out;
}

/** URL path under /dashboard/assets/ → file. */
export function loadDashboardAssets(): Map<string, Asset> {
  const root = join(import.meta.dir, "public");
  const assets = new Map<string, Asset>();
  for (const file of walk(root)) assets.set(relative(root, file).split("\\").join("/"), asset(readFileSync(file), file));
  const chartDir = dirname(createRequire(import.meta.url).resolve("chart.js"));
  for (const name of ["chart.umd.min.js", "chart.umd.min.js.map"]) assets.set(`vendor/${name}`, asset(readFileSync(join(chartDir, name)), name));
  return assets;
}

function serve(request: Request, a: Asset): Response {
  if (request.headers.get("if-none-match") === a.etag) return new Response(null, { status: 304, headers: { ...HEADERS, etag: a.etag } });
  return new Response(a.body, { headers: { ...HEADERS, "content-type": a.type, etag: a.etag } });
}

const PREFIX = "/dashboard/assets/";

const fileDoc = (summary: string, contentType: string): RouteDocs => ({
  GET: { summary, tag: "Dashboard", auth: "none", responses: { "200": { description: summary, contentType, schema: { type: "string" } } } },
});

/** Each file under its own path (a fixed set known at start): no wildcard, nothing outside the set can be asked for. */
export function dashboardRoutes(ctx: Ctx, app: Elysia): void {
  const assets = loadDashboardAssets();
  const page = assets.get("index.html")!;
  mount(ctx, app, "/dashboard", { GET: ({ request }) => serve(request, page) }, MANAGEMENT,
    fileDoc("The operator dashboard (browser page; signs in with an account token)", page.type));
  for (const [name, a] of assets) {
    if (name === "index.html") continue;
    mount(ctx, app, `${PREFIX}${name}`, { GET: ({ request }) => serve(request, a) }, MANAGEMENT, fileDoc(`Dashboard file ${name}`, a.type));
  }
}
