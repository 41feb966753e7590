// Client and bind addresses as the console's doors read them: which addresses are one client (the
// sign-in throttle's key) and which bind addresses stay on this machine (loopback).
import net from 'node:net';

/** The eight 16-bit groups of an IPv6 address (its zone id dropped); undefined when it is not one. */
export function ipv6Groups(address: string): number[] | undefined {
  let text = address.split('%')[0]!.toLowerCase();
  if (text.startsWith('[') && text.endsWith(']')) text = text.slice(1, -1);
  if (!net.isIPv6(text)) return undefined;
  // A trailing dotted quad (::ffff:10.1.2.3, 64:ff9b::1.2.3.4) is the last two groups.
  const lastColon = text.lastIndexOf(':');
  const tail = text.slice(lastColon + 1);
  if (tail.includes('.')) {
    const [a, b, c, d] = tail.split('.').map(Number) as [number, number, number, number];
    text = `${text.slice(0, lastColon + 1)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const halves = text.split('::');
  const part = (s: string | undefined) => (s ? s.split(':').map((g) => parseInt(g, 16)) : []);
  const left = part(halves[0]);
  const right = part(halves[1]);
  const groups = halves.length === 2 ? [...left, ...new Array<number>(8 - left.length - right.length).fill(0), ...right] : left;
  return groups.length === 8 ? groups : undefined;
}

/** The IPv4 address an IPv4-mapped IPv6 address (::ffff:a.b.c.d) carries; undefined for any other. */
function mappedIpv4(groups: number[]): string | undefined {
  if (groups.slice(0, 5).some((g) => g !== 0) || groups[5] !== 0xffff) return undefined;
  const [hi, lo] = [groups[6]!, groups[7]!];
  return [hi >> 8, hi & 255, lo >> 8, lo & 255].join('.');
}

/**
 * The key failed sign-ins are counted under: an IPv4 address as itself (a dual-stack socket's
 * ::ffff:a.b.c.d too), an IPv6 address by its /64. One IPv6 client is handed a whole /64 and can
 * pick any address in it, so counting full addresses would give it 2^64 budgets.
 */
export function throttleKeyOf(address: string): string {
  if (net.isIPv4(address)) return address;
  const groups = ipv6Groups(address);
  if (groups === undefined) return address;
  return (
    mappedIpv4(groups) ??
    `${groups
      .slice(0, 4)
      .map((g) => g.toString(16))
      .join(':')}::/64`
  );
}

/** A bind address (or name) that only this machine can reach: localhost, 127.0.0.0/8, ::1, ::ffff:127.x. */
export function isLoopbackHost(host: string): boolean {
  const name = host.toLowerCase();
  if (name === 'localhost') return true;
  if (net.isIPv4(name)) return name.startsWith('127.');
  const groups = ipv6Groups(name);
  if (groups === undefined) return false;
  const v4 = mappedIpv4(groups);
  if (v4 !== undefined) return v4.startsWith('127.');
  return groups.slice(0, 7).every((g) => g === 0) && groups[7] === 1;
}
