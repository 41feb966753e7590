import { describe, expect, it } from 'vitest';
import { eventFingerprint } from './fingerprint.ts';
import { contractExampleEvent } from './sample.ts';

describe('eventFingerprint', () => {
  const event = contractExampleEvent();

  it('ignores delivery_attempt, key order and whitespace (a redelivery)', () => {
    const reordered = JSON.parse(JSON.stringify(Object.fromEntries(Object.entries(event).reverse()), null, 2));
    expect(eventFingerprint({ ...event, delivery_attempt: 7 })).toBe(eventFingerprint(event));
    expect(eventFingerprint(reordered)).toBe(eventFingerprint(event));
    const { delivery_attempt: _omitted, ...without } = event;
    expect(eventFingerprint(without)).toBe(eventFingerprint(event));
  });

  it('changes with the resource, the version, the data or the tenant (an anomaly)', () => {
    const base = eventFingerprint(event);
    expect(eventFingerprint({ ...event, resource: { ...event.resource, version: 43 } })).not.toBe(base);
    expect(eventFingerprint({ ...event, resource: { ...event.resource, id: 'thm_124' } })).not.toBe(base);
    expect(eventFingerprint({ ...event, data: { ...event.data, name: 'Minimal Darker' } })).not.toBe(base);
    expect(eventFingerprint({ ...event, tenant_id: 'tenant_other' })).not.toBe(base);
    expect(eventFingerprint({ ...event, data: { ...event.data, palette: { accent: '#7C5CFF', background: '#0B0B0C' } } })).not.toBe(base);
  });

  it('is SHA-256 hex of the RFC 8785 form', () => {
    expect(eventFingerprint(event)).toMatch(/^[0-9a-f]{64}$/);
  });
});
