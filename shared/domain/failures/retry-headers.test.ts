import { describe, expect, it } from 'vitest';
import {
  decodeDeadLetterInfo,
  decodeRetryInfo,
  encodeDeadLetterInfo,
  encodeRetryInfo,
  MAX_ERROR_MESSAGE_BYTES,
  originalHeaders,
  RETRY_HEADERS,
  truncateUtf8,
  type RetryInfo,
} from './retry-headers.ts';

const info: RetryInfo = {
  attempt: 2,
  firstFailureAt: new Date('2026-01-02T03:04:05.678Z'),
  lastErrorCode: 'serialization_failure',
  lastErrorMessage: 'could not serialize access',
  originalTopic: 'theme.events',
  originalPartition: 7,
  originalOffset: '123456789012',
  notBefore: new Date('2026-01-02T03:04:35.678Z'),
};

// Consumed headers arrive as Buffers.
const asConsumed = (headers: Record<string, string>) => Object.fromEntries(Object.entries(headers).map(([k, v]) => [k, Buffer.from(v)]));

describe('retry headers', () => {
  it('round-trips through Buffers as kafkajs delivers them', () => {
    const encoded = encodeRetryInfo(info);
    expect(Object.keys(encoded).every((k) => k.startsWith('retry-'))).toBe(true);
    expect(decodeRetryInfo(asConsumed(encoded))).toEqual({ ok: true, info });
  });

  it('reports a record without retry headers as missing', () => {
    expect(decodeRetryInfo({ 'event-id': Buffer.from('x') })).toMatchObject({ ok: false, missing: true });
  });

  it('rejects malformed values with every problem listed', () => {
    const bad = { ...encodeRetryInfo(info), [RETRY_HEADERS.attempt]: 'zero', [RETRY_HEADERS.notBefore]: 'soon' };
    const result = decodeRetryInfo(asConsumed(bad));
    expect(result.ok).toBe(false);
    if (!result.ok) {
      expect(result.missing).toBe(false);
      expect(result.problem).toContain('retry-attempt');
      expect(result.problem).toContain('retry-not-before');
    }
  });

  it('truncates the error message to 512 bytes on a character boundary', () => {
    const long = 'é'.repeat(1000);
    const cut = truncateUtf8(long);
    expect(Buffer.byteLength(cut)).toBeLessThanOrEqual(MAX_ERROR_MESSAGE_BYTES);
    expect(cut.endsWith('…')).toBe(true);
    expect(cut).not.toContain('\uFFFD');
    expect(encodeRetryInfo({ ...info, lastErrorMessage: long })[RETRY_HEADERS.lastErrorMessage]).toBe(cut);
    expect(truncateUtf8('short')).toBe('short');
  });

  it('encodes a DLQ record with its reason and decodes it for replay', () => {
    const at = new Date('2026-01-02T04:00:00.000Z');
    const encoded = encodeDeadLetterInfo({
      ...info,
      attempt: 5,
      reason: 'retries_exhausted',
      deadLetteredAt: at,
      failedTopic: 'theme.events.retry.4',
    });
    expect(encoded['dlq-reason']).toBe('retries_exhausted');
    expect(encoded[RETRY_HEADERS.notBefore]).toBeUndefined();
    const decoded = decodeDeadLetterInfo(asConsumed(encoded));
    expect(decoded).toMatchObject({
      ok: true,
      info: { attempt: 5, reason: 'retries_exhausted', originalOffset: '123456789012', failedTopic: 'theme.events.retry.4' },
    });
  });

  it('keeps only the original headers for a replay', () => {
    const headers = { 'event-id': Buffer.from('e1'), source: 'demo', ...asConsumed(encodeRetryInfo(info)), 'dlq-reason': Buffer.from('x') };
    expect(Object.keys(originalHeaders(headers)).sort()).toEqual(['event-id', 'source']);
  });

  it('forwards the W3C trace context through the retry chain and the DLQ', () => {
    const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    const headers = {
      'event-id': Buffer.from('e1'),
      traceparent: Buffer.from(traceparent),
      tracestate: 'a=b',
      ...asConsumed(encodeRetryInfo(info)),
    };
    expect(originalHeaders(headers)).toMatchObject({ traceparent: Buffer.from(traceparent), tracestate: 'a=b' });
  });
});
