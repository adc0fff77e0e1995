// Provisions what a benchmark needs through the gateway's public API only, the way an agent and
// its human would: agent signup → code from the mail outbox → verify → activation by a signed
// billing webhook (or the admin command) → saved OpenAI key → routing key with one OpenAI lane and
// a monthly budget far above what a run can spend (so budget checks and usage accounting run).
import { createHmac, randomBytes } from "node:crypto";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";

export interface Provisioned {
  accountId: string;
  accountToken: string;
  credentialId: string;
  routingKey: string;
  routingKeyId: string;
  activatedBy: "webhook" | "admin";
}

export interface ProvisionOptions {
  gatewayUrl: string;
  dataDir: string;
  webhookSecret?: string;
  /** Runs the admin command with the gateway's environment (fallback activation). */
  runAdmin: (args: string[]) => Promise<{ code: number; output: string }>;
}

async function call(base: string, path: string, body: unknown, token?: string, extra: Record<string, string> = {}) {
  const res = await fetch(base + path, {
    method: "POST",
    headers: { "content-type": "application/json", ...(token ? { authorization: `Bearer ${token}` } : {}), ...extra },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let json: any = null;
  try { json = JSON.parse(text); } catch {}
  if (!res.ok) throw new Error(`POST ${path} answered ${res.status}: ${text.slice(0, 300)}`);
  return json;
}

/** The newest 6-digit code mailed to `email` (quoted-printable soft breaks undone). */
export function codeFromOutbox(dataDir: string, email: string): string | null {
  const dir = join(dataDir, "outbox");
  let files: string[];
  try { files = readdirSync(dir).filter((f) => f.endsWith(".eml")); } catch { return null; }
  files.sort((a, b) => statSync(join(dir, b)).mtimeMs - statSync(join(dir, a)).mtimeMs);
  for (const f of files) {
    const raw = readFileSync(join(dir, f), "utf8").replace(/=\r?\n/g, "");
    if (!raw.toLowerCase().includes(email.toLowerCase())) continue;
    const body = raw.slice(raw.search(/\r?\n\r?\n/));
    const m = /(?<![\w.-])(\d{6})(?![\w@.-])/.exec(body);
    if (m) return m[1]!;
  }
  return null;
}

/** A Stripe-style signed `checkout.session.completed` for the account. */
export function signedCheckoutEvent(accountId: string, secret: string): { body: string; signature: string } {
  const body = JSON.stringify({
    id: `evt_bench_${randomBytes(8).toString("hex")}`,
    object: "event",
    type: "checkout.session.completed",
    data: { object: { id: `cs_bench_${randomBytes(8).toString("hex")}`, object: "checkout.session", client_reference_id: accountId, payment_status: "paid", status: "complete" } },
  });
  const t = Math.floor(Date.now() / 1000);
  const v1 = createHmac("sha256", secret).update(`${t}.${body}`).digest("hex");
  return { body, signature: `t=${t},v1=${v1}` };
}

export async function provision(opts: ProvisionOptions): Promise<Provisioned> {
  const base = opts.gatewayUrl;
  const email = `bench.${randomBytes(5).toString("hex")}@example.com`;
  await call(base, "/api/auth?action=agent-signup", { email, source: "bench" });
  let code: string | null = null;
  for (let i = 0; i < 50 && !code; i++) {
    code = codeFromOutbox(opts.dataDir, email);
    if (!code) await Bun.sleep(100);
  }
  if (!code) throw new Error(`no signup code for ${email} in ${join(opts.dataDir, "outbox")}`);
  const verified = await call(base, "/api/auth?action=agent-verify", { email, code });
  const accountId: string = verified.user.id;
  const accountToken: string = verified.account_token;

  let activatedBy: Provisioned["activatedBy"];
  if (opts.webhookSecret) {
    const ev = signedCheckoutEvent(accountId, opts.webhookSecret);
    await call(base, "/api/billing/webhook", ev.body, undefined, { "stripe-signature": ev.signature });
    activatedBy = "webhook";
  } else {
    const r = await opts.runAdmin(["activate", accountId]);
    if (r.code !== 0) throw new Error(`admin activate failed (${r.code}): ${r.output.slice(0, 300)}`);
    activatedBy = "admin";
  }
  const me = await fetch(`${base}/v1/organizations/me`, { headers: { authorization: `Bearer ${accountToken}` } }).then((r) => r.json()) as { plan?: string };
  if (me.plan !== "pro") throw new Error(`the account is still on plan ${me.plan} after activation`);

  const cred = await call(base, "/v1/organizations/credentials", { provider: "openai", api_key: `sk-bench-${randomBytes(16).toString("hex")}`, label: "bench mock" }, accountToken);
  const credentialId: string = cred.credential.id;
  const rk = await call(base, "/v1/organizations/routing-keys", {
    label: "bench",
    mode: "fallback",
    // Large enough never to trigger, so the budget reservation and settlement run on every request.
    monthly_budget_usd: 1_000_000,
    providers: [{ provider: "openai", credential_id: credentialId, model: null }],
  }, accountToken);
  return { accountId, accountToken, credentialId, routingKey: rk.raw_key, routingKeyId: rk.routing_key.id, activatedBy };
}
