// Webhook URLs are outbound calls a client chooses: checked like bridge URLs (CONTRACT §2
// ALLOW_PRIVATE_UPSTREAMS) when given, and again at each delivery (sender.ts).
import type { Base } from "../base.ts";
import { badRequest } from "../errors.ts";
import { resolveAndCheck } from "../net/ssrf.ts";

/** A webhook URL is an outbound call the client chooses: http(s), and public unless the operator allows private upstreams. */
export async function checkWebhookUrl(ctx: Pick<Base, "config">, value: unknown, field = "webhook_url"): Promise<string> {
  if (typeof value !== "string" || value.length > 2048) throw badRequest(`${field} must be an http or https URL (at most 2048 characters).`);
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw badRequest(`${field} is not a valid URL.`);
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") throw badRequest(`${field} must use http or https.`);
  if (url.username || url.password) throw badRequest(`${field} must not carry credentials; verify deliveries with the Gateway-Signature header instead.`);
  await resolveAndCheck(ctx, url, field);
  return url.toString();
}

