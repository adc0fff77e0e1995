// The API reference: /openapi.json is a valid OpenAPI 3.1 document built from the routes'
// own schemas, and every route the app serves is in it.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Validator } from "@seriousme/openapi-schema-validator";
import { startTestGateway, storesLabel, type TestGateway } from "../helpers/gateway.ts";
import { createRoutingKeyBody } from "../../src/management/routing-keys/model.ts";

let gw: TestGateway;
beforeAll(async () => {
  gw = await startTestGateway();
}, 60_000);
afterAll(async () => {
  await gw.stop();
}, 60_000);

/** Elysia's `:id` params → OpenAPI's `{id}`. */
const openApiPath = (p: string) => p.replace(/:([A-Za-z0-9_]+)/g, "{$1}");

describe(`OpenAPI document (${storesLabel})`, () => {
  test("/openapi.json validates as OpenAPI 3.1", async () => {
    const res = await gw.req("/openapi.json");
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("application/json");
    const doc = (await res.json()) as any;
    expect(doc.openapi).toBe("3.1.0");
    const result = await new Validator().validate(doc);
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
  });

  test("every route the app serves (path and method) is in the document", async () => {
    const doc = (await (await gw.req("/openapi.json")).json()) as any;
    const served = (gw.app as unknown as { routes: Array<{ method: string; path: string }> }).routes
      // The catch-all per path answers 405 for other methods; it is not an operation.
      .filter((r) => r.method !== "ALL")
      .map((r) => `${r.method} ${openApiPath(r.path)}`);
    expect(served.length).toBeGreaterThan(20);
    const documented = new Set<string>();
    for (const [path, item] of Object.entries(doc.paths as Record<string, Record<string, unknown>>)) {
      for (const m of Object.keys(item)) documented.add(`${m.toUpperCase()} ${path}`);
    }
    const missing = served.filter((s) => !documented.has(s));
    expect(missing).toEqual([]);
    // And nothing is documented that is not served.
    const extra = [...documented].filter((d) => !served.includes(d));
    expect(extra).toEqual([]);
  });

  test("request schemas come from the zod schemas that validate requests (no drift)", async () => {
    const doc = (await (await gw.req("/openapi.json")).json()) as any;
    const post = doc.paths["/v1/organizations/routing-keys"].post;
    const body = post.requestBody.content["application/json"].schema;
    // The fields the strict schema accepts, exactly, and unknown fields refused.
    expect(Object.keys(body.properties).sort()).toEqual(Object.keys(createRoutingKeyBody.shape).sort());
    expect(body.additionalProperties).toBe(false);
    // The lane's provider enum lists every lane kind the validator takes.
    expect(body.properties.providers.items.properties.provider.enum).toContain("bridge");
    // ids go in the query (?id=), as the handler reads them.
    const patch = doc.paths["/v1/organizations/routing-keys"].patch;
    expect(patch.parameters).toEqual([expect.objectContaining({ name: "id", in: "query", required: true })]);
    expect(patch.security).toEqual([{ accountToken: ["read_write"] }]);
    // A route's errors are in its documented shape.
    expect(doc.paths["/v1/chat/completions"].post.responses.default.content["application/json"].schema.$ref).toBe("#/components/schemas/NestedError");
    expect(doc.paths["/v1/organizations/me"].get.responses.default.content["application/json"].schema.$ref).toBe("#/components/schemas/FlatError");
  });

  test("GET / names /docs, /v1 and /healthz (JSON for clients, HTML for browsers)", async () => {
    const { status, body } = await gw.call("/");
    expect(status).toBe(200);
    expect(body).toMatchObject({ docs: "/docs", api: "/v1", health: "/healthz", openapi: "/openapi.json" });
    const html = await gw.req("/", { headers: { accept: "text/html,application/xhtml+xml" } });
    expect(html.headers.get("content-type")).toContain("text/html");
    const text = await html.text();
    for (const link of ["/docs", "/v1", "/healthz"]) expect(text).toContain(link);
  });

  test("/docs is served under a strict Content-Security-Policy, its renderer from this origin", async () => {
    const page = await gw.req("/docs");
    expect(page.status).toBe(200);
    const csp = page.headers.get("content-security-policy") ?? "";
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("script-src 'self'");
    expect(csp).not.toContain("unsafe-eval");
    const html = await page.text();
    expect(html).not.toMatch(/https?:\/\//);
    const js = await gw.req("/docs/scalar.js");
    expect(js.status).toBe(200);
    expect(js.headers.get("content-type")).toContain("javascript");
    expect((await js.arrayBuffer()).byteLength).toBeGreaterThan(100_000);
  });
});
