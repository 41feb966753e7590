// What a page may show of a record, a snapshot or a dead letter: its headers and JSON with anything
// named like a credential replaced. The ingress does not forward signatures, but a record on the DLQ
// may come from elsewhere (a replay tool, a producer in another team), and a provider's snapshot may
// carry a key of its own (a theme's asset token), so every page shows JSON only through these.

const SECRET_NAME = /(secret|token|password|passwd|signature|authorization|api[-_]?key|cookie|credential|private[-_]?key)/i;
export const REDACTED = '[redacted]';

export function isSecretName(name: string): boolean {
  return SECRET_NAME.test(name);
}

export function redactHeaders(headers: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) out[name] = isSecretName(name) ? REDACTED : value;
  return out;
}

function redactValue(value: unknown, depth: number): unknown {
  if (depth > 64) return REDACTED;
  if (Array.isArray(value)) return value.map((v) => redactValue(v, depth + 1));
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value as Record<string, unknown>)) out[k] = isSecretName(k) ? REDACTED : redactValue(v, depth + 1);
    return out;
  }
  return value;
}

/** A JSON value with every secret-named key's value replaced, at any depth. */
export function redactJson(value: unknown): unknown {
  return redactValue(value, 0);
}

/** JSON text with secret-named keys redacted (compact, still JSON); text that is not JSON is not shown. */
export function redactedJsonText(text: string): string {
  try {
    return JSON.stringify(redactValue(JSON.parse(text), 0));
  } catch {
    return `(not JSON: ${Buffer.byteLength(text)} bytes, not shown)`;
  }
}

/**
 * The body as text for display: pretty JSON with secret-named keys redacted; a body that is not
 * JSON is shown only as its length (it may be anything, a credential included).
 */
export function redactedBody(body: Buffer | null): string {
  if (body === null) return '(no body)';
  try {
    return JSON.stringify(redactValue(JSON.parse(body.toString('utf8')), 0), null, 2);
  } catch {
    return `(not JSON: ${body.length} bytes, not shown)`;
  }
}
