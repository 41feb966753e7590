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
  const content: Record<string, unknown> = { ...envelope };
  for (const field of DELIVERY_ONLY_FIELDS) delete content[field];
  return hash('sha256', canonicalize(content) ?? '', 'hex');
}
