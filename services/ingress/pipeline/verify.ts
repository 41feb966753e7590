import { verifySignature, type SignatureFailureReason, type VerifySignatureResult } from '#domain/signing/index.ts';
import type { IngressMetrics } from '../metrics.ts';
import type { Delivery } from './preflight.ts';
import type { Rejection } from './rejections.ts';

export type VerifiedSignature = Extract<VerifySignatureResult, { ok: true }>;

export type VerifyMetrics = Pick<IngressMetrics, 'clockSkew' | 'signatureVerifications'>;

const UNKNOWN_SOURCE: Rejection = { kind: 'unknown_source' };
const SIGNATURE_REJECTIONS: { readonly [R in SignatureFailureReason]: { kind: `signature_${R}` } } = {
  missing_header: { kind: 'signature_missing_header' },
  malformed_timestamp: { kind: 'signature_malformed_timestamp' },
  timestamp_out_of_window: { kind: 'signature_timestamp_out_of_window' },
  malformed_signature: { kind: 'signature_malformed_signature' },
  no_matching_signature: { kind: 'signature_no_matching_signature' },
  secret_retired: { kind: 'signature_secret_retired' },
};

/**
 * The signature over the bytes exactly as received, before any parsing (a re-serialised body is a
 * different body), and the timestamp window. `nowSeconds` is read once, here.
 */
export function verify(
  delivery: Delivery,
  rawBody: Buffer,
  nowSeconds: () => number,
  metrics: VerifyMetrics,
  nowMs?: () => number,
): VerifiedSignature | Rejection {
  const source = delivery.source;
  const verified = verifySignature({
    scheme: source.scheme,
    secrets: source.secrets,
    headers: { id: delivery.id, timestamp: delivery.timestamp, signature: delivery.signature },
    rawBody,
    now: nowSeconds(),
    ...(nowMs === undefined ? {} : { nowMs: nowMs() }),
    toleranceSeconds: source.toleranceSeconds,
  });
  if (!delivery.known) return UNKNOWN_SOURCE;
  // Checked against the stand-in, as an unknown id is; counted as what it is for this source.
  if (delivery.otherScheme) return SIGNATURE_REJECTIONS.missing_header;
  if (verified.clockSkewSeconds !== undefined) metrics.clockSkew.observe({ source: source.id }, verified.clockSkewSeconds);
  // The reason goes to logs and metrics only: telling the caller would help a forger.
  if (!verified.ok) return SIGNATURE_REJECTIONS[verified.reason];
  metrics.signatureVerifications.inc({ source: source.id, secret_id: verified.secretId });
  return verified;
}
