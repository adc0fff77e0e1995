// Mail delivery: the outbox when SMTP_URL is unset, SMTP through nodemailer when it is set
// (real SMTP servers on loopback), and 502 when the code email cannot be sent.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { createServer } from "node:net";
import { eq } from "drizzle-orm";
import { startTestGateway, storesLabel, type TestGateway } from "../helpers/gateway.ts";
import { codeFromMail, outboxMails, randomEmail, signupCall, signupViaApi, startSmtpSink, type SmtpSink } from "../helpers/signup.ts";
import { signupCodes } from "../../src/store/db/schema/index.ts";

/** A loopback port with nothing listening on it. */
async function closedPort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", () => r()));
  const port = (s.address() as { port: number }).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

describe(`mail outbox when SMTP_URL is unset (${storesLabel})`, () => {
  let gw: TestGateway;
  beforeAll(async () => { gw = await startTestGateway({ SIGNUP_IP_LIMIT_PER_HOUR: "1000" }); }, 60_000);
  afterAll(async () => { await gw?.stop(); }, 60_000);

  test("the code email is written to DATA_DIR/outbox as an .eml file and the log line names the file, not the code", async () => {
    const email = randomEmail();
    expect((await signupCall(gw, "agent-signup", { email })).status).toBe(200);
    const dir = join(gw.env.DATA_DIR!, "outbox");
    const files = readdirSync(dir).filter((f) => f.endsWith(".eml"));
    const mine = files.map((f) => readFileSync(join(dir, f), "utf8")).filter((m) => m.includes(email));
    expect(mine.length).toBe(1);
    expect(mine[0]).toMatch(/^From: /m);
    expect(mine[0]).toMatch(/^Subject: Your Model Gateway signup code$/m);
    const code = codeFromMail(mine[0]!);
    const line = gw.logs.find((l) => l.includes("mail written to the outbox"));
    expect(line).toBeDefined();
    expect(line).toContain(dir);
    expect(gw.logs.join("")).not.toContain(code);
  });

  test("the whole flow works from the outbox (the helper other suites use)", async () => {
    const a = await signupViaApi(gw);
    expect(a.verify.user.id).toBe(a.accountId);
    expect(outboxMails(gw, a.email).length).toBe(2); // the code, then the owner notice
  });
});

describe(`SMTP delivery (${storesLabel})`, () => {
  let refusing: SmtpSink;
  let authed: SmtpSink;
  let gwRefused: TestGateway;
  let gwDown: TestGateway;
  let gwAuth: TestGateway;
  beforeAll(async () => {
    refusing = await startSmtpSink({ refuse: true });
    authed = await startSmtpSink({ auth: { user: "gateway", pass: "p@ss word" } });
    const down = await closedPort();
    [gwRefused, gwDown, gwAuth] = await Promise.all([
      startTestGateway({ SMTP_URL: refusing.url, SIGNUP_IP_LIMIT_PER_HOUR: "1000" }),
      startTestGateway({ SMTP_URL: `smtp://127.0.0.1:${down}`, SIGNUP_IP_LIMIT_PER_HOUR: "1000" }),
      startTestGateway({ SMTP_URL: authed.url, MAIL_FROM: "Gateway Test <gw@example.com>", SIGNUP_IP_LIMIT_PER_HOUR: "1000" }),
    ]);
  }, 60_000);
  afterAll(async () => {
    await Promise.all([gwRefused?.stop(), gwDown?.stop(), gwAuth?.stop()]);
    await refusing?.close();
    await authed?.close();
  }, 60_000);

  test("502 {error} without code when the SMTP server refuses the mail; no usable code is left behind", async () => {
    const email = randomEmail();
    const r = await signupCall(gwRefused, "agent-signup", { email });
    expect(r.status).toBe(502);
    expect(Object.keys(r.body)).toEqual(["error"]);
    expect(await gwRefused.ctx.db.select().from(signupCodes).where(eq(signupCodes.email, email))).toEqual([]);
    expect(refusing.mails.length).toBe(0);
  });

  test("a mail that could not be sent does not use up one of the 3 codes per hour", async () => {
    const email = randomEmail();
    for (let i = 0; i < 4; i++) expect((await signupCall(gwRefused, "agent-signup", { email })).status).toBe(502);
  });

  test("502 when the SMTP server is unreachable", async () => {
    const r = await signupCall(gwDown, "agent-signup", { email: randomEmail() });
    expect(r.status).toBe(502);
    expect(Object.keys(r.body)).toEqual(["error"]);
  });

  test("SMTP_URL credentials are used to log in, MAIL_FROM is the sender, and the code arrives", async () => {
    const a = await signupViaApi(gwAuth, { sink: authed });
    expect(a.verify.plan).toBe("free");
    const mail = authed.to(a.email)[0]!;
    expect(mail.from).toBe("gw@example.com");
    expect(mail.raw).toMatch(/^From: Gateway Test <gw@example\.com>$/m);
    expect(gwAuth.logs.join("")).not.toContain("p@ss word");
  });
});
