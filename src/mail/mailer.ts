// Outgoing mail: SMTP through nodemailer when SMTP_URL is set, else .eml files in DATA_DIR/outbox
// (a newcomer's `npm start` needs no mail server; the file is what the SMTP server would have got).
// Log lines name the kind of mail, the recipient domain and the file, never the body: bodies
// carry one-time codes.
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Transporter } from "nodemailer";
import type { Config } from "../config.ts";
import type { Logger } from "../logger.ts";
import { randomToken, sha256Hex } from "../lib/crypto.ts";

export interface MailMessage {
  to: string;
  subject: string;
  text: string;
  /** What the mail is for, for logs (`signup_code`, `owner_notice`). */
  kind: string;
  /** The request that caused the mail, for logs. */
  requestId?: string;
}

export interface Mailer {
  readonly kind: "smtp" | "outbox";
  /** Resolves once the SMTP server accepted the message (or the file is written); throws MailSendError otherwise. */
  send(msg: MailMessage): Promise<void>;
  close(): void;
}

export class MailSendError extends Error {
  override name = "MailSendError";
}

const domainOf = (email: string) => email.slice(email.lastIndexOf("@") + 1);

// nodemailer (with the Node modules it pulls in, ~15 MB of RSS) is imported when the first mail is
// sent, not at boot: the gateway's requests never send mail, and idle memory has a budget (README).
type CreateTransport = (options: object) => Transporter;
let nodemailerLoad: Promise<CreateTransport> | null = null;
const loadNodemailer = () => (nodemailerLoad ??= import("nodemailer").then((m) => m.default.createTransport as CreateTransport));

/** 12 hex characters of sha256(lower-cased address): the outbox file name's recipient tag. */
export function outboxTag(email: string): string {
  return sha256Hex(email.trim().toLowerCase()).slice(0, 12);
}

export function outboxDir(dataDir: string): string {
  return join(dataDir, "outbox");
}

export function createMailer(config: Config, log: Logger): Mailer {
  if (config.SMTP_URL) return smtpMailer(config.SMTP_URL, config.MAIL_FROM, log);
  return outboxMailer(outboxDir(config.DATA_DIR), config.MAIL_FROM, log);
}

function smtpMailer(url: string, from: string, log: Logger): Mailer {
  // Bounded waits: a hung SMTP server must turn into a 502, not a request that never ends.
  let transport: Transporter | null = null;
  let closed = false;
  return {
    kind: "smtp",
    async send(msg) {
      try {
        if (!transport) {
          const createTransport = await loadNodemailer();
          transport ??= createTransport({
            url,
            connectionTimeout: 10_000,
            greetingTimeout: 10_000,
            socketTimeout: 20_000,
            logger: false,
          });
          if (closed) transport.close();
        }
        await transport.sendMail({ from, to: msg.to, subject: msg.subject, text: msg.text });
        log.info({ requestId: msg.requestId, mail: msg.kind, toDomain: domainOf(msg.to), via: "smtp" }, "mail sent");
      } catch (e) {
        const err = e as { message?: string; responseCode?: number; code?: string };
        log.warn({ requestId: msg.requestId, mail: msg.kind, toDomain: domainOf(msg.to), via: "smtp", smtpCode: err.responseCode ?? null, errorCode: err.code ?? null }, "mail could not be sent");
        throw new MailSendError(`SMTP delivery failed (${err.responseCode ?? err.code ?? "error"})`);
      }
    },
    close() {
      closed = true;
      transport?.close();
    },
  };
}

function outboxMailer(dir: string, from: string, log: Logger): Mailer {
  // The stream transport builds the same RFC 5322 message SMTP would carry.
  let composer: Transporter | null = null;
  return {
    kind: "outbox",
    async send(msg) {
      try {
        composer ??= (await loadNodemailer())({ streamTransport: true, buffer: true, newline: "unix" });
        const info = await composer.sendMail({ from, to: msg.to, subject: msg.subject, text: msg.text });
        mkdirSync(dir, { recursive: true });
        // The recipient's hash in the name lets a reader find one mailbox's mail without opening every file.
        const file = join(dir, `${new Date().toISOString().replace(/[:.]/g, "-")}-${outboxTag(msg.to)}-${randomToken(8)}.eml`);
        writeFileSync(file, info.message as Buffer, { mode: 0o600 });
        log.info({ requestId: msg.requestId, mail: msg.kind, toDomain: domainOf(msg.to), via: "outbox", file }, "mail written to the outbox (SMTP_URL is not set)");
      } catch (e) {
        log.warn({ requestId: msg.requestId, mail: msg.kind, via: "outbox", err: e instanceof Error ? e.message : String(e) }, "mail could not be written to the outbox");
        throw new MailSendError("writing the outbox file failed");
      }
    },
    close() {},
  };
}
