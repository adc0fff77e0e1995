// Connect-time SSRF guard for bridge calls (CONTRACT §2 ALLOW_PRIVATE_UPSTREAMS, §5).
// A bridge's base_url was checked at registration, but DNS answers change: right before each
// call the host is resolved again, every address is checked, and the call goes to that checked
// address (original Host header and TLS server name kept), so a rebinding DNS server cannot
// swap in a private address between the check and the connect. Redirects are never followed.
import type { AdapterEnv } from "../env.ts";
import { GatewayError } from "../../errors.ts";
import { resolveAndCheck } from "../../net/ssrf.ts";

export function bridgeFailure(message: string): GatewayError {
  return new GatewayError(502, message, { code: "upstream_error", retryable: true });
}

export interface PinnedTarget {
  /** The URL to fetch (host replaced by the checked address when pinned). */
  url: string;
  /** Host header to send when pinned. */
  host?: string;
  /** TLS server name (SNI and certificate check) when pinned over https. */
  serverName?: string;
}

/** Resolves and checks `target`; throws a lane failure when it is refused. */
export async function pinTarget(ctx: AdapterEnv, target: string): Promise<PinnedTarget> {
  const url = new URL(target);
  if (ctx.config.ALLOW_PRIVATE_UPSTREAMS) return { url: target };
  let addresses: string[];
  try {
    addresses = await resolveAndCheck(ctx, url, "base_url");
  } catch (e) {
    const why = e instanceof GatewayError ? e.message : "its host could not be checked";
    throw bridgeFailure(`The bridge was not called: ${why}`);
  }
  const address = addresses[0];
  if (!address) throw bridgeFailure("The bridge was not called: its host did not resolve.");
  return pinnedTarget(target, address);
}

/** `target` with its host replaced by the checked `address`, keeping Host and the TLS server name. */
export function pinnedTarget(target: string, address: string): PinnedTarget {
  const url = new URL(target);
  const hostname = url.hostname.replace(/^\[(.*)\]$/, "$1");
  if (hostname === address) return { url: target };
  const pinned = new URL(target);
  pinned.hostname = address.includes(":") ? `[${address}]` : address;
  return { url: pinned.toString(), host: url.host, serverName: url.protocol === "https:" ? hostname : undefined };
}

/**
 * fetch to a bridge: pinned to the checked address, never following a redirect (a 3xx is a lane
 * failure, since following it would leave the checked address).
 */
export async function bridgeFetch(ctx: AdapterEnv, target: string, init: { method: string; headers: Record<string, string>; body?: string; signal?: AbortSignal }): Promise<Response> {
  const pin = await pinTarget(ctx, target);
  const headers = { ...init.headers };
  if (pin.host) headers.host = pin.host;
  const opts: RequestInit & { tls?: { serverName?: string } } = {
    method: init.method,
    headers,
    body: init.body,
    redirect: "manual",
    signal: init.signal,
  };
  if (pin.serverName) opts.tls = { serverName: pin.serverName };
  const res = await fetch(pin.url, opts);
  if (res.status >= 300 && res.status < 400) {
    await res.body?.cancel().catch(() => {});
    throw bridgeFailure(`The bridge answered with a redirect (${res.status}); the gateway does not follow bridge redirects. Point the bridge's base_url at the final address.`);
  }
  return res;
}
