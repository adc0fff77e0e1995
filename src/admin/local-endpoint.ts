// POST /admin/commands: the admin command run by the gateway itself, for `npm run admin` beside a
// gateway that holds the embedded database (which allows one process). Two locks: the peer's
// socket address must be loopback (X-Forwarded-For is never read here), and the request must
// carry the secret the gateway wrote to DATA_DIR/admin.json at start (a new one each start).
import type { Elysia } from "elysia";
import { z } from "zod";
import type { Ctx } from "../context.ts";
import { GatewayError } from "../errors.ts";
import { safeEqual } from "../lib/crypto.ts";
import { readBody } from "../management/zod-input.ts";
import { publishInvalidation } from "../store/invalidation.ts";
import { mount, MANAGEMENT, type RequestContext } from "../http/route.ts";
import { runAdminCommand } from "./commands.ts";

export const ADMIN_SECRET_HEADER = "x-admin-secret";

const AdminCommandBody = z.strictObject({
  args: z.array(z.string().max(320)).max(8).describe("The command line after `npm run admin --`, e.g. [\"activate\", \"ops@example.com\"]."),
});

const AdminCommandResult = z.object({
  exit_code: z.number().int(),
  stdout: z.array(z.string()),
  stderr: z.array(z.string()),
});

const LOOPBACK = new Set(["127.0.0.1", "::1", "::ffff:127.0.0.1"]);

/** `secret` is null when the gateway wrote no admin file (DATABASE_URL: the command runs beside it directly). */
export function adminRoutes(ctx: Ctx, app: Elysia, secret: () => string | null) {
  mount(ctx, app, "/admin/commands", {
    POST: async (rc: RequestContext) => {
      const s = secret();
      if (!rc.socketIp || !LOOPBACK.has(rc.socketIp)) throw new GatewayError(403, "The admin endpoint answers loopback connections only: run `npm run admin` on the gateway's host.", { code: "forbidden" });
      const given = rc.request.headers.get(ADMIN_SECRET_HEADER);
      if (s === null || !given || !safeEqual(given, s)) {
        throw new GatewayError(401, `Missing or wrong ${ADMIN_SECRET_HEADER}. \`npm run admin\` reads it from DATA_DIR/admin.json, which the gateway writes when it starts on the embedded database.`, { code: "invalid_admin_secret" });
      }
      const body = await readBody(ctx, rc.request, AdminCommandBody);
      const stdout: string[] = [], stderr: string[] = [];
      const exit = await runAdminCommand(ctx.db, body.args, { out: (l) => stdout.push(l), err: (l) => stderr.push(l) }, {
        accountChanged: (accountId) => publishInvalidation(ctx, { kind: "account", accountId }),
        pricesChanged: async () => {
          await ctx.services.prices.reloadDb();
          await publishInvalidation(ctx, { kind: "prices" });
        },
      });
      ctx.log.info({ command: body.args[0] ?? null, exitCode: exit }, "admin command run");
      return { exit_code: exit, stdout, stderr };
    },
  }, MANAGEMENT, {
    POST: {
      summary: "Run an admin command inside this gateway (loopback only)",
      description: "Used by `npm run admin` when this gateway holds the embedded database. Answers only connections from the gateway's own host that carry the secret from DATA_DIR/admin.json.",
      tag: "Operations",
      auth: "admin-secret",
      body: AdminCommandBody,
      responses: { "200": { description: "The command ran; its exit code and output lines.", schema: AdminCommandResult } },
    },
  });
}
