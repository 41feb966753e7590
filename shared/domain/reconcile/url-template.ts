import { RECONCILE_PLACEHOLDERS } from '#domain/sources/index.ts';

export type ResourceRefValues = Record<(typeof RECONCILE_PLACEHOLDERS)[number], string>;

/** Where a GET goes: the origin parsed from the template, the path and query exactly as built. */
export interface ExpandedUrl {
  protocol: 'http:' | 'https:';
  hostname: string;
  port: number;
  /** Path and query, sent as is: never normalised (see expandUrlTemplate). */
  path: string;
  /** For messages and reports. */
  url: string;
}

const LOOPBACK_HOSTS = new Set(['localhost', '127.0.0.1', '[::1]', '::1']);

/** Whether a host name is this machine: the only place a bearer token may travel over plain http. */
export function isLoopbackHost(hostname: string): boolean {
  return LOOPBACK_HOSTS.has(hostname.toLowerCase()) || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(hostname);
}

/**
 * Expands `https://provider.example/api/{type}s/{id}`. Every value is percent-encoded as one path
 * segment or query value, and a value made only of dots has its dots encoded too: `.` and `..`
 * are valid ids, and as bare segments they would name the parent. The path is then sent as
 * built, never through `new URL`, which would collapse `.`, `..` and even `%2E%2E` segments.
 * A template whose scheme is http:// and whose host is not loopback is refused: the API's
 * credentials would travel in clear.
 */
export function expandUrlTemplate(template: string, values: ResourceRefValues): ExpandedUrl {
  const expanded = template.replace(/\{([^}]*)\}/g, (_, name: string) => {
    if (!(RECONCILE_PLACEHOLDERS as readonly string[]).includes(name)) throw new Error(`unknown placeholder {${name}}`);
    return encodeSegment(values[name as keyof ResourceRefValues]);
  });
  const match = /^(https?):\/\/([^/?#]+)([^#]*)/i.exec(expanded);
  if (!match) throw new Error(`not an http(s) URL: ${template}`);
  // Only the origin is parsed (and checked) by the URL parser.
  const origin = new URL(`${match[1]!.toLowerCase()}://${match[2]!}/`);
  const protocol = origin.protocol as ExpandedUrl['protocol'];
  if (protocol === 'http:' && !isLoopbackHost(origin.hostname)) {
    throw new Error(`refusing http:// to ${origin.hostname}: the API's credentials would travel in clear (use https://)`);
  }
  const rest = match[3]!;
  const path = rest === '' ? '/' : rest.startsWith('?') ? `/${rest}` : rest;
  const port = origin.port === '' ? (protocol === 'https:' ? 443 : 80) : Number(origin.port);
  return { protocol, hostname: origin.hostname, port, path, url: `${origin.origin}${path}` };
}

function encodeSegment(value: string): string {
  const encoded = encodeURIComponent(value);
  return /^\.+$/.test(value) ? encoded.replaceAll('.', '%2E') : encoded;
}
