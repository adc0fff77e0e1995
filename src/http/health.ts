// Liveness (the process answers) and readiness (its stores answer, and it is not shutting down).
import type { Elysia } from "elysia";
import type { Ctx } from "../context.ts";
import { json, mount, MANAGEMENT } from "./route.ts";


export function healthRoutes(ctx: Ctx, app: Elysia) {
  const lifecycle = ctx.services.lifecycle;
  mount(ctx, app, "/healthz", { GET: () => ({ ok: true }) }, MANAGEMENT, {
    GET: { summary: "Liveness: the process answers", tag: "Operations", auth: "none", responses: { "200": { description: "`{ok: true}`" } } },
  });
  mount(ctx, app, "/readyz", {
    GET: async () => {
      // At once, without asking the stores: a load balancer must stop sending new work now.
      if (lifecycle.draining) return json({ ok: false, draining: true }, 503);
      const check = async (f: () => Promise<void>) => {
        try {
          await Promise.race([f(), new Promise((_, rej) => setTimeout(() => rej(new Error("timeout")), 2000))]);
          return "ok";
        } catch (e) {
          return "unavailable";
        }
      };
      const [database, kv] = await Promise.all([check(() => ctx.dbh.ping()), check(() => ctx.kv.ping())]);
      const ok = database === "ok" && kv === "ok";
      return json({ ok, database: { kind: ctx.dbh.kind, status: database }, kv: { kind: ctx.kv.kind, status: kv } }, ok ? 200 : 503);
    },
  }, MANAGEMENT, {
    GET: {
      summary: "Readiness: the database and the KV answer and the process is not shutting down", tag: "Operations", auth: "none",
      responses: { "200": { description: "Both stores answer." }, "503": { description: "A store does not answer (which one is in the body), or the process is draining after SIGTERM (`draining: true`)." } },
    },
  });
}
