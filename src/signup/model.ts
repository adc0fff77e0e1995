// Bodies of agent-signup and agent-verify. Signup errors carry no `code` (SPEC Errors table):
// they are flat `{error: "<sentence>"}`.
import { z } from "zod";
import { GatewayError } from "../errors.ts";
import { judgeEmail, normalizeEmail } from "./email-policy.ts";

export const SOURCE_MAX_LENGTH = 100;

/** A codeless signup error: 400, 429 or 502 with a sentence saying what to do next. */
export const signupError = (status: number, message: string) => new GatewayError(status, message);

const email = z.unknown().meta({ type: "string", format: "email", description: "The address of the human who will own the account." }).optional().transform((v, ctx) => {
  if (v === undefined || v === null || v === "") {
    ctx.addIssue({ code: "custom", message: "Field `email` is required: the address of the human who will own the account." });
    return z.NEVER;
  }
  if (typeof v !== "string") {
    ctx.addIssue({ code: "custom", message: "Field `email` must be a string holding an email address." });
    return z.NEVER;
  }
  const e = normalizeEmail(v);
  const verdict = judgeEmail(e);
  if (verdict === "disposable") {
    ctx.addIssue({ code: "custom", message: "Disposable email domains are not accepted. Use an address that a human reads." });
    return z.NEVER;
  }
  if (verdict === "invalid") {
    ctx.addIssue({ code: "custom", message: "Field `email` is not a valid email address." });
    return z.NEVER;
  }
  return e;
});

// Extra fields are ignored here: signup has nothing to mass-assign, and agents often add context.
export const signupBody = z.object({
  email,
  source: z.unknown().meta({ type: "string", maxLength: SOURCE_MAX_LENGTH, description: "Where the agent found the gateway (a short slug)." }).optional().transform((v, ctx) => {
    if (v === undefined || v === null) return null;
    if (typeof v !== "string" || v.trim() === "" || v.length > SOURCE_MAX_LENGTH || /[\u0000-\u001f\u007f\p{Cf}]/u.test(v)) {
      ctx.addIssue({ code: "custom", message: `Field \`source\` must be a short slug (1 to ${SOURCE_MAX_LENGTH} printable characters) naming where the agent found the gateway.` });
      return z.NEVER;
    }
    return v.trim();
  }),
});

export const verifyBody = z.object({
  email,
  code: z.unknown().meta({ type: "string", pattern: "^\\d{6}$", description: "The 6-digit code from the email." }).optional().transform((v, ctx) => {
    if (v === undefined || v === null || v === "") {
      ctx.addIssue({ code: "custom", message: "Field `code` is required: the 6-digit code from the email." });
      return z.NEVER;
    }
    const s = typeof v === "string" ? v.trim() : null;
    if (s === null || !/^\d{6}$/.test(s)) {
      ctx.addIssue({ code: "custom", message: "Field `code` must be the 6-digit code from the email, as a string." });
      return z.NEVER;
    }
    return s;
  }),
});

export function parseSignup<T extends z.ZodType>(schema: T, body: unknown): z.infer<T> {
  const r = schema.safeParse(body);
  if (!r.success) throw signupError(400, r.error.issues[0]!.message);
  return r.data;
}
