import { describe, expect, it } from 'vitest';
import { TRACE_PARENT_HEADER, TRACE_STATE_HEADER } from '@opentelemetry/core';
import {
  decodeEventHeaders,
  deliveryAttemptHeader,
  encodeEventHeaders,
  EVENT_HEADERS,
  receivedAtHeader,
  traceContextHeaders,
  traceIdHeader,
  traceIdOf,
} from './event-headers.ts';

const headers = {
  eventId: 'evt_1',
  source: 'demo',
  receivedAt: new Date('2026-12-01T10:00:00.000Z'),
  secretId: 'k1',
  bodySha256: 'ab'.repeat(32),
  eventType: 'theme.updated',
};

describe('event-topic headers', () => {
  it('encodes what the ingress learnt, optional ones only when known', () => {
    expect(encodeEventHeaders(headers)).toEqual({
      'event-id': 'evt_1',
      source: 'demo',
      'received-at': '2026-12-01T10:00:00.000Z',
      'secret-id': 'k1',
      'body-sha256': 'ab'.repeat(32),
      'event-type': 'theme.updated',
    });
    const full = encodeEventHeaders({ ...headers, idempotencyKey: 'idem-1', deliveryAttempt: 0 });
    expect(full[EVENT_HEADERS.idempotencyKey]).toBe('idem-1');
    expect(full[EVENT_HEADERS.deliveryAttempt]).toBe('0');
  });

  it('decodes consumed headers (Buffers) back to the same values', () => {
    const encoded = encodeEventHeaders({ ...headers, idempotencyKey: 'idem-1', deliveryAttempt: 3 });
    const consumed = Object.fromEntries(Object.entries(encoded).map(([k, v]) => [k, Buffer.from(v)]));
    expect(decodeEventHeaders(consumed)).toEqual({ ...headers, idempotencyKey: 'idem-1', deliveryAttempt: 3 });
  });

  it('leaves out what is missing or malformed', () => {
    expect(decodeEventHeaders(undefined)).toEqual({});
    expect(decodeEventHeaders({ 'received-at': 'yesterday', 'delivery-attempt': '-1' })).toEqual({});
    expect(deliveryAttemptHeader({ 'delivery-attempt': '1.5' })).toBeUndefined();
  });

  it('reads received-at as ISO time or epoch milliseconds', () => {
    expect(receivedAtHeader({ 'received-at': '1764583200000' })?.toISOString()).toBe('2025-12-01T10:00:00.000Z');
    expect(receivedAtHeader({ 'received-at': [Buffer.from('2026-12-01T10:00:00Z')] })?.toISOString()).toBe('2026-12-01T10:00:00.000Z');
  });
});

describe('trace context headers', () => {
  const base = {
    eventId: 'evt_1',
    source: 'demo',
    receivedAt: new Date('2026-01-01T00:00:00Z'),
    bodySha256: 'h',
    eventType: 'theme.updated',
  };

  it('with tracing off (no trace context) the ingress writes no traceparent or tracestate', () => {
    const headers = encodeEventHeaders(base);
    expect(Object.keys(headers)).not.toContain(EVENT_HEADERS.traceparent);
    expect(Object.keys(headers)).not.toContain(EVENT_HEADERS.tracestate);
  });

  it('uses the W3C names the propagator and instrumentation-kafkajs use, and reads them back', () => {
    expect([EVENT_HEADERS.traceparent, EVENT_HEADERS.tracestate]).toEqual([TRACE_PARENT_HEADER, TRACE_STATE_HEADER]);
    const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    const headers = encodeEventHeaders({ ...base, traceparent, tracestate: 'a=b' });
    expect(traceContextHeaders(headers)).toEqual({ traceparent, tracestate: 'a=b' });
    expect(decodeEventHeaders(headers)).toMatchObject({ traceparent, tracestate: 'a=b' });
    expect(traceContextHeaders({})).toEqual({});
  });

  it('reads the W3C trace id a traceparent names, and nothing from an invalid one', () => {
    const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
    expect(traceIdOf(`00-${traceId}-00f067aa0ba902b7-01`)).toBe(traceId);
    expect(traceIdOf(`00-${traceId}-00f067aa0ba902b7-00`)).toBe(traceId); // not sampled: still its trace
    expect(traceIdOf(`01-${traceId}-00f067aa0ba902b7-01-future`)).toBe(traceId); // a later version may add fields
    expect(traceIdHeader({ traceparent: Buffer.from(`00-${traceId}-00f067aa0ba902b7-01`) })).toBe(traceId);
    for (const invalid of [
      undefined,
      null,
      '',
      `00-${traceId}-00f067aa0ba902b7-01-extra`,
      `ff-${traceId}-00f067aa0ba902b7-01`,
      `00-${'0'.repeat(32)}-00f067aa0ba902b7-01`,
      `00-${traceId}-${'0'.repeat(16)}-01`,
      `00-${traceId.toUpperCase()}-00f067aa0ba902b7-01`,
      `00-${traceId.slice(1)}-00f067aa0ba902b7-01`,
    ]) {
      expect(traceIdOf(invalid), String(invalid)).toBeUndefined();
    }
    expect(traceIdHeader({})).toBeUndefined();
  });
});
