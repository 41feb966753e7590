import { hash } from 'node:crypto';
import canonicalize from 'canonicalize';
import type { ReceivedEnvelope } from './envelope.ts';

/** Fields that describe one delivery, not the event: a redelivery may change them freely. */
export const DELIVERY_ONLY_FIELDS: readonly string[] = ['delivery_attempt'];

/**
 * What tells a provider's redelivery (a duplicate) from an anomaly (the same event id with other
 * content): SHA-256 over the envelope in RFC 8785 canonical form (JCS: keys sorted, no
 * whitespace, numbers in their shortest form) without the delivery-only fields. The raw bytes'
 * digest cannot serve: a provider that retries may re-serialise the body (other whitespace, other
 * key order) and counts its attempts in the body.
 */
export function eventFingerprint(envelope: ReceivedEnvelope): string {
  return contentFingerprint(envelope as unknown as Record<string, unknown>);
}

function contentFingerprint(value: Record<string, unknown>): string {
  const content: Record<string, unknown> = { ...value };
  for (const field of DELIVERY_ONLY_FIELDS) delete content[field];
  return hash('sha256', canonicalize(content) ?? '', 'hex');
}

/**
 * The fingerprint of a body the bridge stored, from its JSON alone: the same value eventFingerprint
 * gives for a body that parses (parseEvent's envelope is the JSON value itself), and still one for
 * a body an earlier contract accepted and today's refuses. A stored body is compared with a
 * redelivery that parses today; asking it to pass today's contract too would turn the provider's
 * redelivery into an anomaly. undefined: not a JSON object.
 */
export function storedBodyFingerprint(payload: string): string | undefined {
  let value: unknown;
  try {
    value = JSON.parse(payload);
  } catch {
    return undefined;
  }
  return typeof value === 'object' && value !== null && !Array.isArray(value)
    ? contentFingerprint(value as Record<string, unknown>)
    : undefined;
}
