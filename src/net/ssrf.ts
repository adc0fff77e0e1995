// SSRF guard for URLs that users hand the gateway (bridge base_url). Unless the operator set
// ALLOW_PRIVATE_UPSTREAMS=true, a host that resolves to anything but public unicast space
// (loopback, private, link-local incl. the cloud metadata address, CGNAT, unique-local,
// unspecified, multicast, reserved, or v6 ranges that tunnel to v4) is refused with 400 bad_request.
// Checked at registration and again right before connecting (DNS answers can change).
import { lookup } from "node:dns/promises";
import { isValid, parse, type IPv4, type IPv6 } from "ipaddr.js";
import type { Config } from "../config.ts";
import { badRequest } from "../errors.ts";

const NAT64_PREFIX = parse("64:ff9b::") as IPv6;

/** The IPv4 address in the low 32 bits of an IPv6 address. */
function embeddedIPv4(a: IPv6): IPv4 {
  const p = a.parts;
  return parse(`${p[6]! >> 8}.${p[6]! & 0xff}.${p[7]! >> 8}.${p[7]! & 0xff}`) as IPv4;
}

/**
 * IPv6 text with a dotted IPv4 tail in WHATWG URL's canonical form: ipaddr.js reads any such tail
 * as IPv4-mapped (`::8.8.8.8` becomes `::ffff:808:808`), which would hide the ::/96 form.
 */
function canonical(address: string): string {
  if (!address.includes(":") || !address.includes(".")) return address;
  try {
    return new URL(`http://[${address}]/`).hostname.slice(1, -1);
  } catch {
    return address;
  }
}

/**
 * The range name ipaddr.js gives an address, with the IPv6 forms that reach IPv4 judged by the
 * IPv4 they carry: IPv4-mapped (::ffff:0:0/96) and NAT64 (64:ff9b::/96, a public IPv4 behind a
 * NAT64 gateway is fine, a private one is not). ipaddr.js calls the deprecated IPv4-compatible
 * form (::/96, e.g. [::7f00:1] = 127.0.0.1) plain unicast; it is refused as a whole.
 * Every other special IPv6 range (6to4, Teredo, site-local, unique-local, multicast,
 * documentation, ORCHID, the other NAT64 prefix 64:ff9b:1::/48…) keeps its own name and is refused.
 */
export function rangeOf(address: string): string {
  const a: IPv4 | IPv6 = parse(canonical(address));
  if (a.kind() === "ipv4") return a.range();
  const v6 = a as IPv6;
  if (v6.isIPv4MappedAddress()) return v6.toIPv4Address().range();
  const range = v6.range();
  if (range === "rfc6052" && v6.match(NAT64_PREFIX, 96)) return embeddedIPv4(v6).range();
  if (range === "unicast" && v6.parts.slice(0, 6).every((x) => x === 0)) return "ipv4Compatible";
  return range;
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
  ipv4Compatible: "an IPv4-compatible IPv6 address (::/96, which can reach IPv4 hosts such as loopback)",
  "6to4": "a 6to4 address (2002::/16, which tunnels to IPv4)",
  teredo: "a Teredo address (2001::/32, which tunnels to IPv4)",
  rfc6052: "a NAT64 address",
  deprecatedSiteLocal: "a site-local address (fec0::/10)",
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
export async function resolveAndCheck(ctx: { config: Pick<Config, "ALLOW_PRIVATE_UPSTREAMS"> }, url: URL, field = "base_url"): Promise<string[]> {
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
