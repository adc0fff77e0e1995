// SSRF guard for URLs that users hand the gateway (bridge base_url). Unless the operator set
// ALLOW_PRIVATE_UPSTREAMS=true, a host that resolves to anything but public unicast space
// (loopback, private, link-local incl. the cloud metadata address, CGNAT, unique-local,
// unspecified, multicast, reserved, or v6 ranges that tunnel to v4) is refused with 400 bad_request.
// Checked at registration and again right before connecting (DNS answers can change).
import { lookup } from "node:dns/promises";
import { isValid, parse, type IPv4, type IPv6 } from "ipaddr.js";
import type { Ctx } from "../context.ts";
import { badRequest } from "../errors.ts";

/** The range name ipaddr.js gives an address; IPv4-mapped IPv6 is judged as its IPv4. */
export function rangeOf(address: string): string {
  let a: IPv4 | IPv6 = parse(address);
  if (a.kind() === "ipv6" && (a as IPv6).isIPv4MappedAddress()) a = (a as IPv6).toIPv4Address();
  return a.range();
}

/** Only plain public unicast is allowed; every special-purpose range is refused. */
export function isPublicAddress(address: string): boolean {
  if (!isValid(address)) return false;
  return rangeOf(address) === "unicast";
}

const RANGE_WORDS: Record<string, string> = {
  loopback: "a loopback address",
  private: "a private-network address",
  linkLocal: "a link-local address (this includes the cloud metadata service)",
  carrierGradeNat: "a carrier-grade NAT address",
  uniqueLocal: "a unique-local address (this includes the cloud metadata service)",
  unspecified: "the unspecified address",
  multicast: "a multicast address",
  broadcast: "the broadcast address",
};

function hostOf(url: URL): string {
  // WHATWG URL keeps IPv6 literals in brackets.
  return url.hostname.replace(/^\[(.*)\]$/, "$1");
}

/**
 * Resolves the URL's host and returns its addresses, refusing non-public ones unless
 * ALLOW_PRIVATE_UPSTREAMS is true. With private upstreams allowed nothing is checked and no DNS
 * query is made: the result is the literal address, or [] for a host name.
 * Throws 400 bad_request naming `field` when the host is refused or cannot be resolved.
 */
export async function resolveAndCheck(ctx: Ctx, url: URL, field = "base_url"): Promise<string[]> {
  const host = hostOf(url);
  const literal = isValid(host) ? [host] : null;
  if (ctx.config.ALLOW_PRIVATE_UPSTREAMS) return literal ?? [];
  let addresses: string[];
  if (literal) {
    addresses = literal;
  } else {
    try {
      addresses = (await lookup(host, { all: true, verbatim: true })).map((a) => a.address);
    } catch {
      throw badRequest(`\`${field}\` host ${host} could not be resolved. Use a host name with a public DNS record.`);
    }
    if (addresses.length === 0) throw badRequest(`\`${field}\` host ${host} could not be resolved. Use a host name with a public DNS record.`);
  }
  for (const a of addresses) {
    if (isPublicAddress(a)) continue;
    const range = isValid(a) ? rangeOf(a) : "invalid";
    const what = RANGE_WORDS[range] ?? `a special-purpose address (${range})`;
    throw badRequest(`\`${field}\` resolves to ${what}, ${a}, which the gateway does not connect to. Use a publicly reachable address (the operator can allow private upstreams with ALLOW_PRIVATE_UPSTREAMS=true).`);
  }
  return addresses;
}
