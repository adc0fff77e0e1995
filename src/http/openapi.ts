// The OpenAPI 3.1 document of everything the app serves. Each route describes its operations
// where it is mounted (the last argument of mount()), naming the very zod schemas its handler
// validates with; the document is built from those schemas (zod's JSON Schema output), so the
// reference cannot drift from what the gateway accepts. A route mounted without a description
// is missing from the document, and test/openapi.test.ts fails on it.
import { z } from "zod";
import type { ErrorShape } from "../errors.ts";

export type DocMethod = "GET" | "POST" | "PATCH" | "DELETE" | "PUT";

/** Who may call an operation (OpenAPI security requirement). */
export type Auth = "none" | "routing-key" | "account-read" | "account-write" | "admin-secret";

export interface ResponseDoc {
  description: string;
  /** Defaults to application/json. */
  contentType?: string;
  schema?: z.ZodType | Record<string, unknown>;
}

export interface OperationDoc {
  summary: string;
  description?: string;
  tag: string;
  auth: Auth;
  /** The strict query schema the handler reads with readQuery(). */
  query?: z.ZodType;
  /** The JSON body schema the handler validates (or documents, for pass-through inference). */
  body?: z.ZodType;
  /** A body that is not JSON (multipart uploads): its content type and schema. */
  rawBody?: { contentType: string; schema: Record<string, unknown>; required?: boolean };
  /** Body may be omitted (every field optional). */
  bodyOptional?: boolean;
  /** Success responses by status; the error responses come from the path's error shape. */
  responses?: Record<string, ResponseDoc>;
}

export type RouteDocs = Partial<Record<DocMethod, OperationDoc>>;

/** The same operations under an alias path (legacy routes): same schemas, another tag. */
export function aliasDocs(docs: RouteDocs, tag: string, note: string): RouteDocs {
  const out: RouteDocs = {};
  for (const [m, op] of Object.entries(docs) as Array<[DocMethod, OperationDoc]>) {
    out[m] = { ...op, tag, description: op.description ? `${note} ${op.description}` : note };
  }
  return out;
}

interface MountedRoute {
  path: string;
  shape: ErrorShape;
  docs: RouteDocs;
}

/** Per app: the routes mounted on it with their descriptions (an app is built per gateway). */
const registry = new WeakMap<object, Map<string, MountedRoute>>();

export function recordRoute(app: object, mounted: string, shape: ErrorShape, docs: RouteDocs | undefined): void {
  if (!docs) return;
  const path = mounted.replace(/:([A-Za-z0-9_]+)/g, "{$1}"); // Elysia's `:model` → OpenAPI's `{model}`
  let routes = registry.get(app);
  if (!routes) registry.set(app, (routes = new Map()));
  const prev = routes.get(path);
  routes.set(path, { path, shape, docs: { ...prev?.docs, ...docs } });
}

/** zod → JSON Schema 2020-12 (the dialect OpenAPI 3.1 uses), as the client sends it. */
export function jsonSchemaOf(schema: z.ZodType | Record<string, unknown>): Record<string, unknown> {
  if (!(schema instanceof z.ZodType)) return schema;
  const out = z.toJSONSchema(schema, { io: "input", unrepresentable: "any", target: "draft-2020-12" }) as Record<string, unknown>;
  delete out.$schema;
  return out;
}

const SECURITY: Record<Auth, Array<Record<string, string[]>>> = {
  none: [],
  "routing-key": [{ routingKey: [] }],
  "account-read": [{ accountToken: [] }],
  "account-write": [{ accountToken: ["read_write"] }],
  "admin-secret": [{ adminSecret: [] }],
};

const ERROR_SCHEMAS = {
  NestedError: {
    type: "object",
    description: "OpenAI's error object: inference endpoints.",
    required: ["error"],
    properties: {
      error: {
        type: "object",
        required: ["message"],
        properties: {
          message: { type: "string" },
          type: { type: "string" },
          param: { type: ["string", "null"] },
          code: { type: ["string", "null"] },
        },
      },
    },
  },
  AnthropicError: {
    type: "object",
    description: "Anthropic's error object: /v1/messages.",
    required: ["type", "error"],
    properties: {
      type: { const: "error" },
      error: { type: "object", required: ["type", "message"], properties: { type: { type: "string" }, message: { type: "string" } } },
    },
  },
  GoogleError: {
    type: "object",
    description: "Google's error object: the Gemini-native /v1beta routes.",
    required: ["error"],
    properties: {
      error: {
        type: "object",
        required: ["code", "message", "status"],
        properties: {
          code: { type: "integer", description: "The HTTP status." },
          message: { type: "string" },
          status: { type: "string", description: "google.rpc status name: INVALID_ARGUMENT, UNAUTHENTICATED, PERMISSION_DENIED, NOT_FOUND, RESOURCE_EXHAUSTED, UNAVAILABLE, INTERNAL…" },
          details: { type: "array", items: { type: "object" } },
        },
      },
    },
  },
  FlatError: {
    type: "object",
    description: "Management, signup and /blitz errors: a sentence and, where documented, a code.",
    required: ["error"],
    properties: { error: { type: "string" }, code: { type: "string" } },
  },
};

const ERROR_SCHEMA_OF: Record<ErrorShape, keyof typeof ERROR_SCHEMAS> = { nested: "NestedError", flat: "FlatError", anthropic: "AnthropicError", google: "GoogleError" };

function parametersOf(query: z.ZodType): Array<Record<string, unknown>> {
  const s = jsonSchemaOf(query);
  const props = (s.properties ?? {}) as Record<string, Record<string, unknown>>;
  const required = new Set((s.required ?? []) as string[]);
  return Object.entries(props).map(([name, schema]) => ({ name, in: "query", required: required.has(name), schema }));
}

function operationId(method: string, path: string): string {
  const words = path.split(/[^A-Za-z0-9]+/).filter(Boolean).map((w) => w[0]!.toUpperCase() + w.slice(1));
  return method.toLowerCase() + (words.join("") || "Root");
}

function operationOf(method: DocMethod, route: MountedRoute, op: OperationDoc): Record<string, unknown> {
  const out: Record<string, unknown> = {
    operationId: operationId(method, route.path),
    summary: op.summary,
    tags: [op.tag],
    security: SECURITY[op.auth],
  };
  if (op.description) out.description = op.description;
  if (op.query) out.parameters = parametersOf(op.query);
  if (op.body) {
    out.requestBody = { required: !op.bodyOptional, content: { "application/json": { schema: jsonSchemaOf(op.body) } } };
  } else if (op.rawBody) {
    out.requestBody = { required: op.rawBody.required ?? true, content: { [op.rawBody.contentType]: { schema: op.rawBody.schema } } };
  }
  const responses: Record<string, unknown> = {};
  for (const [status, r] of Object.entries(op.responses ?? { "200": { description: "OK" } })) {
    responses[status] = {
      description: r.description,
      content: { [r.contentType ?? "application/json"]: r.schema ? { schema: jsonSchemaOf(r.schema) } : {} },
    };
  }
  const errorRef = { $ref: `#/components/schemas/${ERROR_SCHEMA_OF[route.shape]}` };
  responses.default = { description: "An error, in this path's documented shape.", content: { "application/json": { schema: errorRef } } };
  out.responses = responses;
  return out;
}

/** The reader's order: calling models first, then setting them up, then the rest; new tags go before the aliases. */
const TAG_ORDER = ["Inference", "Routing keys", "Credentials", "Bridges", "Sub session", "Account tokens", "Account", "Usage", "Webhooks", "Signup", "Dashboard", "Operations", "Meta"];
const tagRank = (t: string) => (t === "Legacy aliases" ? 1000 : TAG_ORDER.includes(t) ? TAG_ORDER.indexOf(t) : 500);

export interface DocumentInfo {
  title: string;
  version: string;
  description: string;
}

/** The document for one app, from the descriptions its routes were mounted with. */
export function buildOpenApiDocument(app: object, info: DocumentInfo): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  const tags = new Set<string>();
  const routes = [...(registry.get(app)?.values() ?? [])].sort((a, b) => a.path.localeCompare(b.path));
  for (const route of routes) {
    const item: Record<string, unknown> = {};
    for (const [method, op] of Object.entries(route.docs) as Array<[DocMethod, OperationDoc]>) {
      item[method.toLowerCase()] = operationOf(method, route, op);
      tags.add(op.tag);
    }
    paths[route.path] = item;
  }
  return {
    openapi: "3.1.0",
    info,
    tags: [...tags].sort((a, b) => tagRank(a) - tagRank(b)).map((name) => ({ name })),
    paths,
    components: {
      securitySchemes: {
        routingKey: { type: "http", scheme: "bearer", description: "A routing key (gw_…), created with POST /v1/organizations/routing-keys." },
        accountToken: { type: "http", scheme: "bearer", description: "An account token: sk_… (read_write) or rk_… (read_only)." },
        adminSecret: { type: "apiKey", in: "header", name: "x-admin-secret", description: "The secret a gateway on the embedded database writes to DATA_DIR/admin.json at start; loopback connections only." },
      },
      schemas: ERROR_SCHEMAS,
    },
  };
}
