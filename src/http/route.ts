// Mounts a path with its allowed methods. Every other method answers 405 (with code
// `method_not_allowed` on management, without on inference, /blitz and /v1beta), errors are turned into
// the path's documented shape here, and every response carries the request id.
import type { Elysia } from "elysia";
import { asGatewayError, errorResponse, loggableError, methodNotAllowed, websocketNotServed, type ErrorShape } from "../errors.ts";
import type { Ctx } from "../context.ts";
import type { RequestContext } from "./request-context.ts";
import { recordRoute, type RouteDocs } from "./openapi.ts";

export type { RequestContext };

export type Method = "GET" | "POST" | "PATCH" | "DELETE" | "PUT";

export type Handler = (rc: RequestContext) => Promise<Response | object> | Response | object;

export interface MountOptions {
  shape: ErrorShape;
  /** Management paths put `method_not_allowed` in the 405 body; inference and /blitz do not. */
  codeOn405: boolean;
}

let seq = 0;
export function nextRequestId(ctx: Ctx, request: Request): string {
  const given = request.headers.get("x-request-id");
  if (given && given.length <= 128 && /^[\w.:-]+$/.test(given)) return given;
  return `${ctx.instanceId}-${(++seq).toString(36)}`;
}

export function json(body: unknown, status = 200, headers?: Record<string, string>): Response {
  return new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json", ...headers } });
}

/**
 * `docs` describes the path's operations for the OpenAPI document (openapi.ts): name the zod
 * schemas the handler validates with. Every mounted path needs one (test/openapi.test.ts).
 */
export function mount(ctx: Ctx, app: Elysia, path: string, handlers: Partial<Record<Method, Handler>>, opts: MountOptions, docs?: RouteDocs) {
  const allowed = Object.keys(handlers) as Method[];
  recordRoute(app, path, opts.shape, docs);
  const tracker = ctx.services.requestTracker;
  const lifecycle = ctx.services.lifecycle;
  for (const method of allowed) {
    const h = handlers[method]!;
    const run = async ({ request, server }: { request: Request; server: { requestIP(r: Request): { address: string } | null } | null }) => {
      const requestId = nextRequestId(ctx, request);
      const access = tracker.open(requestId, method, path);
      let res: Response;
      // The peer address is looked up only by handlers that read it (signup): it costs ~2 % of a request.
      const rc: RequestContext = { request, requestId, access, get socketIp() { return server?.requestIP(request)?.address; } };
      try {
        const out = await h(rc);
        res = out instanceof Response ? out : json(out);
      } catch (e) {
        const err = asGatewayError(e);
        if (err.code === "unhandled") {
          ctx.log.error({ requestId, path, method, err: loggableError(e) }, "request failed");
        } else if (err.status >= 500) {
          // Known failures (every lane failed, a store is down): the answer says what happened; no stack.
          ctx.log.warn({ requestId, path, method, status: err.status, code: err.code, message: err.message }, "request failed");
        }
        res = errorResponse(err, opts.shape);
      }
      res.headers.set("x-request-id", requestId);
      // Draining: each answer closes its connection, so a load balancer stops reusing connections
      // to this instance before the listener closes (none is left idle for it to race with).
      if (lifecycle.draining) res.headers.set("connection", "close");
      if (rc.headers) for (const name in rc.headers) if (!res.headers.has(name)) res.headers.set(name, rc.headers[name]!);
      access.status = res.status;
      access.release();
      return res;
    };
    // Bodies are read by the handlers themselves: size caps come first, parsing is ours.
    (app as any).route(method, path, run, { parse: "none" });
  }
  (app as any).all(path, ({ request }: { request: Request }) => {
    const refusal = isWebSocketUpgrade(request) ? websocketNotServed(allowed) : methodNotAllowed(allowed, opts.codeOn405);
    return answerUnrouted(ctx, request, path, errorResponse(refusal, opts.shape));
  }, { parse: "none" });
}

function isWebSocketUpgrade(request: Request): boolean {
  return request.method === "GET" && request.headers.get("upgrade")?.toLowerCase() === "websocket";
}

/** A 405 or 404 still carries a request id and gets its access line. */
export function answerUnrouted(ctx: Ctx, request: Request, route: string, res: Response): Response {
  const requestId = nextRequestId(ctx, request);
  const access = ctx.services.requestTracker.open(requestId, request.method, route);
  res.headers.set("x-request-id", requestId);
  access.status = res.status;
  access.release();
  return res;
}

export const MANAGEMENT: MountOptions = { shape: "flat", codeOn405: true };
export const INFERENCE: MountOptions = { shape: "nested", codeOn405: false };
export const BLITZ: MountOptions = { shape: "flat", codeOn405: false };
/** /v1/messages: errors in Anthropic's shape so its SDKs raise their own typed errors. */
export const ANTHROPIC: MountOptions = { shape: "anthropic", codeOn405: false };
/** /v1beta (Gemini-native): errors in Google's shape, `{error: {code, message, status}}`. */
export const GEMINI: MountOptions = { shape: "google", codeOn405: false };
