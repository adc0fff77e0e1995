// The unit a per-IP limit counts: one IPv4 address, or one IPv6 /64. A single IPv6 subscriber is
// routinely handed a whole /64 (2^64 addresses), so counting each address apart would let one
// holder of a /64 pass any per-IP limit; the /64 is what one network end-point controls.
import ipaddr from "ipaddr.js";

/** `203.0.113.7`, `2001:db8:1:2::/64` (IPv4-mapped IPv6 counts as its IPv4). Unparseable text is its own group. */
export function ipLimitGroup(ip: string): string {
  // A zone index (`fe80::1%eth0`) names an interface, not another network.
  const bare = ip.includes("%") ? ip.slice(0, ip.indexOf("%")) : ip;
  if (!ipaddr.isValid(bare)) return ip;
  const addr = ipaddr.parse(bare);
  if (addr.kind() === "ipv4") return addr.toString();
  const v6 = addr as ipaddr.IPv6;
  if (v6.isIPv4MappedAddress()) return v6.toIPv4Address().toString();
  const p = v6.parts;
  return `${new ipaddr.IPv6([p[0]!, p[1]!, p[2]!, p[3]!, 0, 0, 0, 0]).toString()}/64`;
}
