// Legacy aliases (SPEC "Versioning"): they run the very handlers of their /v1/organizations/...
// twins, so auth, the plan gate, validation and answers are identical.
//   /v1/routing-keys          = /v1/organizations/routing-keys   (GET, POST, PATCH ?id=)
//   /v1/bridges               = /v1/organizations/bridges        (GET, POST, DELETE ?id=)
//   /api/sub?action=<action>  = /v1/organizations/sub-session, by action:
//       status      GET            → GET    sub-session
//       connect     POST           → POST   sub-session
//       disconnect  POST or DELETE → DELETE sub-session
//   A known action with another method answers 405 method_not_allowed; a missing or unknown
//   action answers 400 bad_request (after authentication, as any other validation).
import type { Elysia } from "elysia";
import { z } from "zod";
import type { Ctx } from "../../context.ts";
import { badRequest, methodNotAllowed } from "../../errors.ts";
import { mount, MANAGEMENT, type Handler, type Method } from "../../http/route.ts";
import { authenticate } from "../guard.ts";
import { aliasDocs } from "../../http/openapi.ts";
import { routingKeyDocs, routingKeyHandlers } from "../routing-keys/index.ts";
import { bridgeDocs, bridgeHandlers } from "../bridges/index.ts";
import { subSessionDocs, subSessionHandlers } from "../sub-session/index.ts";

export const SUB_ACTIONS: Record<string, { methods: Method[]; runs: Method }> = {
  status: { methods: ["GET"], runs: "GET" },
  connect: { methods: ["POST"], runs: "POST" },
  disconnect: { methods: ["POST", "DELETE"], runs: "DELETE" },
};

/** The same request without `action`, so the target handler sees only its own parameters. */
function withoutAction(request: Request): Request {
  const url = new URL(request.url);
  url.searchParams.delete("action");
  return new Request(url.toString(), request);
}

function subActionHandler(ctx: Ctx, method: Method): Handler {
  const twins = subSessionHandlers(ctx);
  return async (rc) => {
    const url = new URL(rc.request.url);
    const actions = url.searchParams.getAll("action");
    // Own properties only: `?action=valueOf` must not find Object.prototype (a 500 before).
    const spec = actions.length === 1 && Object.hasOwn(SUB_ACTIONS, actions[0]!) ? SUB_ACTIONS[actions[0]!] : undefined;
    if (spec && !spec.methods.includes(method)) throw methodNotAllowed(spec.methods, true);
    if (!spec) {
      await authenticate(ctx, rc.request, { write: method !== "GET" });
      throw badRequest(`Query parameter \`action\` must be one of: ${Object.keys(SUB_ACTIONS).join(", ")} (status with GET, connect with POST, disconnect with POST or DELETE).`);
    }
    return twins[spec.runs]!({ ...rc, request: withoutAction(rc.request) });
  };
}

export function legacyRoutes(ctx: Ctx, app: Elysia): void {
  mount(ctx, app, "/v1/routing-keys", routingKeyHandlers(ctx), MANAGEMENT, aliasDocs(routingKeyDocs, "Legacy aliases", "Alias of /v1/organizations/routing-keys."));
  mount(ctx, app, "/v1/bridges", bridgeHandlers(ctx), MANAGEMENT, aliasDocs(bridgeDocs, "Legacy aliases", "Alias of /v1/organizations/bridges."));
  const sub = aliasDocs(subSessionDocs, "Legacy aliases", "Alias of /v1/organizations/sub-session: ?action=status (GET), connect (POST), disconnect (POST or DELETE).");
  const action = (values: string[]) => z.strictObject({ action: z.enum(values as [string, ...string[]]) });
  mount(ctx, app, "/api/sub", {
    GET: subActionHandler(ctx, "GET"),
    POST: subActionHandler(ctx, "POST"),
    DELETE: subActionHandler(ctx, "DELETE"),
  }, MANAGEMENT, {
    GET: { ...sub.GET!, query: action(["status"]) },
    POST: { ...sub.POST!, summary: "Connect or disconnect the subscription sign-in", query: action(["connect", "disconnect"]), bodyOptional: true },
    DELETE: { ...sub.DELETE!, query: action(["disconnect"]) },
  });
}
