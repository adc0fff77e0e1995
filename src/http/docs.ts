// The API reference: GET /openapi.json (built from the routes' own descriptions, openapi.ts),
// GET /docs (Scalar's API reference, its standalone bundle served from node_modules: a browser
// here may have no internet, and the page loads nothing from elsewhere), and GET / (where to go).
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import type { Elysia } from "elysia";
import type { Ctx } from "../context.ts";
import { buildOpenApiDocument } from "./openapi.ts";
import { MANAGEMENT, mount } from "./route.ts";

const TITLE = "Model Gateway API";
const VERSION = "1.0.0";

/**
 * Only this origin: the page runs our two scripts, fetches /openapi.json, nothing else (Scalar
 * injects its styles at run time, hence 'unsafe-inline' for styles only).
 */
export const DOCS_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self' data:",
  "connect-src 'self'",
  "worker-src 'self' blob:",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join("; ");

const DOCS_PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${TITLE}</title>
<link rel="icon" href="data:,">
</head>
<body>
<div id="app"></div>
<script src="/docs/scalar.js"></script>
<script src="/docs/init.js"></script>
</body>
</html>
`;

// Fonts from the page's own stack (no font CDN), no telemetry, no hosted agent or developer
// tools (they call Scalar's servers), the document from this origin.
const INIT_SCRIPT = `Scalar.createApiReference("#app", {
  url: "/openapi.json",
  withDefaultFonts: false,
  telemetry: false,
  hideClientButton: true,
  showDeveloperTools: "never",
  agent: { disabled: true },
  defaultOpenAllTags: true,
});
`;

const ROOT_PAGE = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${TITLE}</title><link rel="icon" href="data:,"></head>
<body style="font-family: system-ui, sans-serif; max-width: 40rem; margin: 3rem auto">
<h1>Model Gateway</h1>
<p>An OpenAI-compatible gateway. Point your SDK's base URL at <code>/v1</code>.</p>
<ul>
<li><a href="/docs">API reference</a> (<a href="/openapi.json">OpenAPI document</a>)</li>
<li><a href="/healthz">Health</a></li>
</ul>
</body></html>
`;

const SECURITY_HEADERS = { "x-content-type-options": "nosniff", "referrer-policy": "no-referrer" };

let scalarBundle: Uint8Array | null = null;
/** Read once, on the first /docs visit (3.5 MB; most gateways never serve it). */
function scalarScript(): Uint8Array {
  scalarBundle ??= readFileSync(createRequire(import.meta.url).resolve("@scalar/api-reference/browser/standalone.js"));
  return scalarBundle;
}

function wantsHtml(request: Request): boolean {
  const accept = request.headers.get("accept") ?? "";
  return accept.includes("text/html");
}

const htmlDoc = (description: string) => ({ "200": { description, contentType: "text/html" } });
const scriptDoc = (description: string) => ({ "200": { description, contentType: "text/javascript" } });

export function docsRoutes(ctx: Ctx, app: Elysia): void {
  let document: string | null = null;
  // Built on first request, once every route is mounted.
  const openapi = () => (document ??= JSON.stringify(buildOpenApiDocument(app, {
    title: TITLE,
    version: VERSION,
    description: "OpenAI-compatible inference (`/v1`), the management API (`/v1/organizations/…`), agent signup and health. "
      + "Inference takes a routing key (gw_…); management takes an account token (sk_… to change, rk_… to read).",
  })));

  mount(ctx, app, "/", {
    GET: ({ request }) => wantsHtml(request)
      ? new Response(ROOT_PAGE, { headers: { "content-type": "text/html; charset=utf-8", ...SECURITY_HEADERS } })
      : { name: "model-gateway", docs: "/docs", openapi: "/openapi.json", api: "/v1", health: "/healthz" },
  }, MANAGEMENT, {
    GET: {
      summary: "Where to go from here", tag: "Meta", auth: "none",
      description: "A short JSON naming the API reference, the API base and the health check (an HTML page for browsers).",
      responses: { "200": { description: "Links to /docs, /v1 and /healthz." } },
    },
  });
  mount(ctx, app, "/openapi.json", {
    GET: () => new Response(openapi(), { headers: { "content-type": "application/json", "cache-control": "no-cache" } }),
  }, MANAGEMENT, {
    GET: { summary: "This OpenAPI 3.1 document", tag: "Meta", auth: "none", responses: { "200": { description: "The OpenAPI document." } } },
  });
  mount(ctx, app, "/docs", {
    GET: () => new Response(DOCS_PAGE, { headers: { "content-type": "text/html; charset=utf-8", "content-security-policy": DOCS_CSP, ...SECURITY_HEADERS } }),
  }, MANAGEMENT, { GET: { summary: "API reference (browser page)", tag: "Meta", auth: "none", responses: htmlDoc("The API reference page.") } });
  mount(ctx, app, "/docs/scalar.js", {
    GET: () => new Response(scalarScript(), { headers: { "content-type": "text/javascript; charset=utf-8", "cache-control": "public, max-age=86400", ...SECURITY_HEADERS } }),
  }, MANAGEMENT, { GET: { summary: "The API reference page's renderer", tag: "Meta", auth: "none", responses: scriptDoc("Scalar's standalone bundle.") } });
  mount(ctx, app, "/docs/init.js", {
    GET: () => new Response(INIT_SCRIPT, { headers: { "content-type": "text/javascript; charset=utf-8", ...SECURITY_HEADERS } }),
  }, MANAGEMENT, { GET: { summary: "The API reference page's settings", tag: "Meta", auth: "none", responses: scriptDoc("Starts the renderer on /openapi.json.") } });
}
