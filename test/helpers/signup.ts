// The real agent signup flow for tests and benchmarks: agent-signup → read the code out of the
// mail (outbox file or SMTP sink) → agent-verify; and activation through a signed billing webhook.
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import type { Server } from "node:net";
import Stripe from "stripe";
import { SMTPServer } from "smtp-server";
import { randomToken } from "../../src/lib/crypto.ts";
import { outboxTag } from "../../src/mail/mailer.ts";
import type { TestGateway } from "./gateway.ts";

/** A random address on a non-disposable domain; unique so shared Redis counters never collide. */
export function randomEmail(tag = "agent"): string {
  return `${tag}-${randomToken(12).toLowerCase()}@example.com`;
}

/** A random client IP, sent as X-Forwarded-For (the harness sets TRUST_PROXY=1). */
export function randomIp(): string {
  const b = () => 1 + Math.floor(Math.random() * 254);
  return `10.${b()}.${b()}.${b()}`;
}

/** Decodes quoted-printable soft breaks so a code split across lines still reads whole. */
function unfold(raw: string): string {
  return raw.replace(/=\r?\n/g, "");
}

/** The 6-digit code in a signup mail. */
export function codeFromMail(raw: string): string {
  const m = /Verification code: (\d{6})/.exec(unfold(raw));
  if (!m) throw new Error("no verification code in the mail");
  return m[1]!;
}

function recipientOf(raw: string): string {
  const m = /^To: (.*)$/im.exec(raw);
  return (m?.[1] ?? "").toLowerCase();
}

/** Every .eml in DATA_DIR/outbox addressed to `email`, oldest first. */
export function outboxMails(gw: TestGateway, email: string): string[] {
  const dir = join(gw.env.DATA_DIR!, "outbox");
  const tag = outboxTag(email);
  let files: string[] = [];
  try { files = readdirSync(dir).filter((f) => f.endsWith(".eml") && f.includes(tag)); } catch { return []; }
  return files
    .map((f) => ({ f, t: statSync(join(dir, f)).mtimeMs }))
    .sort((a, b) => a.t - b.t || a.f.localeCompare(b.f))
    .map(({ f }) => readFileSync(join(dir, f), "utf8"))
    .filter((raw) => recipientOf(raw).includes(email.toLowerCase()));
}

export interface SinkMail { from: string; to: string[]; raw: string }

/**
 * A real SMTP server on loopback that records what it receives; `refuse` makes it reject every
 * recipient, `refuseData` rejects the messages it returns true for (after DATA).
 */
export interface SmtpSink {
  url: string;
  mails: SinkMail[];
  to(email: string): SinkMail[];
  lastCode(email: string): string;
  close(): Promise<void>;
}

export async function startSmtpSink(opts: { refuse?: boolean; auth?: { user: string; pass: string }; refuseData?: (raw: string) => boolean } = {}): Promise<SmtpSink> {
  const mails: SinkMail[] = [];
  const server = new SMTPServer({
    secure: false,
    disabledCommands: opts.auth ? ["STARTTLS"] : ["STARTTLS", "AUTH"],
    authOptional: !opts.auth,
    allowInsecureAuth: true,
    logger: false,
    onAuth(auth, _session, cb) {
      if (opts.auth && auth.username === opts.auth.user && auth.password === opts.auth.pass) return cb(null, { user: auth.username });
      cb(new Error("Invalid username or password"));
    },
    onRcptTo(address, _session, cb) {
      if (opts.refuse) {
        const err = new Error("Mailbox unavailable") as Error & { responseCode: number };
        err.responseCode = 550;
        return cb(err);
      }
      cb();
    },
    onData(stream, session, cb) {
      const chunks: Buffer[] = [];
      stream.on("data", (c: Buffer) => chunks.push(c));
      stream.on("end", () => {
        const raw = Buffer.concat(chunks).toString("utf8");
        if (opts.refuseData?.(raw)) {
          const err = new Error("Message rejected") as Error & { responseCode: number };
          err.responseCode = 554;
          return cb(err);
        }
        mails.push({
          from: session.envelope.mailFrom ? session.envelope.mailFrom.address : "",
          to: session.envelope.rcptTo.map((r) => r.address.toLowerCase()),
          raw,
        });
        cb();
      });
    },
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
  const port = ((server as unknown as { server: Server }).server.address() as { port: number }).port;
  const auth = opts.auth ? `${encodeURIComponent(opts.auth.user)}:${encodeURIComponent(opts.auth.pass)}@` : "";
  const to = (email: string) => mails.filter((m) => m.to.includes(email.toLowerCase()));
  return {
    url: `smtp://${auth}127.0.0.1:${port}`,
    mails,
    to,
    lastCode(email) {
      const codes = to(email).filter((m) => /Verification code:/.test(unfold(m.raw)));
      if (!codes.length) throw new Error(`no code mail for ${email} in the SMTP sink`);
      return codeFromMail(codes[codes.length - 1]!.raw);
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** The newest code sent to `email`, from the sink when given, else from the gateway's outbox. */
export function lastCode(gw: TestGateway, email: string, sink?: SmtpSink): string {
  if (sink) return sink.lastCode(email);
  const mails = outboxMails(gw, email).filter((raw) => /Verification code:/.test(unfold(raw)));
  if (!mails.length) throw new Error(`no code mail for ${email} in the outbox`);
  return codeFromMail(mails[mails.length - 1]!);
}

export async function signupCall(gw: TestGateway, action: string, body: unknown, ip = randomIp()) {
  return gw.call(`/api/auth?action=${action}`, { method: "POST", body, headers: { "x-forwarded-for": ip } });
}

/**
 * Runs agent-signup and agent-verify for real and returns the new (or signed-in) account.
 * The gateway must mail to its outbox (no SMTP_URL) unless `sink` is the SMTP server it mails to.
 */
export async function signupViaApi(gw: TestGateway, opts: { email?: string; ip?: string; sink?: SmtpSink; source?: string } = {}) {
  const email = opts.email ?? randomEmail();
  const ip = opts.ip ?? randomIp();
  const s = await signupCall(gw, "agent-signup", { email, ...(opts.source ? { source: opts.source } : {}) }, ip);
  if (s.status !== 200) throw new Error(`agent-signup answered ${s.status}: ${JSON.stringify(s.body)}`);
  const code = lastCode(gw, email, opts.sink);
  const v = await signupCall(gw, "agent-verify", { email, code }, ip);
  if (v.status !== 200) throw new Error(`agent-verify answered ${v.status}: ${JSON.stringify(v.body)}`);
  return { accountId: v.body.user.id as string, token: v.body.account_token as string, email, signup: s.body, verify: v.body };
}

/** A signed Stripe-style event, as Stripe would deliver it. */
export async function signedEvent(secret: string, event: Record<string, unknown>, timestamp?: number) {
  const payload = JSON.stringify(event);
  const header = await Stripe.webhooks.generateTestHeaderStringAsync({ payload, secret, ...(timestamp !== undefined ? { timestamp } : {}) });
  return { payload, header };
}

export function checkoutCompletedEvent(accountId: string, id = `evt_${randomToken(16)}`) {
  return {
    id,
    object: "event",
    type: "checkout.session.completed",
    created: Math.floor(Date.now() / 1000),
    data: { object: { id: `cs_test_${randomToken(16)}`, object: "checkout.session", client_reference_id: accountId, payment_status: "paid", status: "complete" } },
  };
}

export async function postWebhook(gw: TestGateway, payload: string, header: string | null) {
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (header !== null) headers["stripe-signature"] = header;
  return gw.call("/api/billing/webhook", { method: "POST", body: payload, headers });
}

/** Activates an account the way the payment processor does. The gateway needs BILLING_WEBHOOK_SECRET. */
export async function activateViaWebhook(gw: TestGateway, accountId: string) {
  const secret = gw.env.BILLING_WEBHOOK_SECRET;
  if (!secret) throw new Error("start the gateway with BILLING_WEBHOOK_SECRET to use activateViaWebhook");
  const { payload, header } = await signedEvent(secret, checkoutCompletedEvent(accountId));
  const r = await postWebhook(gw, payload, header);
  if (r.status !== 200) throw new Error(`billing webhook answered ${r.status}: ${JSON.stringify(r.body)}`);
  return r.body as { received: true; outcome: string; duplicate: boolean };
}

/** Signs up and activates: a `pro` account made by the real flows. */
export async function proAccountViaApi(gw: TestGateway, opts: { email?: string; ip?: string; sink?: SmtpSink } = {}) {
  const acct = await signupViaApi(gw, opts);
  await activateViaWebhook(gw, acct.accountId);
  return acct;
}

