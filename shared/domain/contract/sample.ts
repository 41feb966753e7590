import { randomUUID } from 'node:crypto';
import type { EventEnvelope } from './envelope.ts';

export type SampleThemeEventOverrides = Partial<Omit<EventEnvelope, 'resource'>> & {
  resource?: Partial<EventEnvelope['resource']>;
};

/** The snapshot of the contract's own example event (a provider's model, as it sends it). */
export function sampleThemeSnapshot(): Record<string, unknown> {
  return {
    slug: 'minimal-dark',
    name: 'Minimal Dark',
    status: 'active',
    palette: { background: '#0B0B0C', foreground: '#F5F7FA', accent: '#7C5CFF' },
    layout: { clockStyle: 'split-flap', showSeconds: false, timezone: 'Asia/Jakarta' },
    assets: [
      {
        type: 'thumbnail',
        url: 'https://cdn.example.com/themes/thm_123/thumb.png',
        checksum: 'sha256:3d4f2bf07dc1be38b20cd6e46949a1071f9d0e3d5b3a5e36d3f0e3a8a0c6b2f1',
      },
    ],
  };
}

/**
 * The contract's example event exactly as the contract writes it (theme.updated, thm_123 at
 * version 42), for documentation and tests; the digest is spelled out in full.
 */
export function contractExampleEvent(): EventEnvelope {
  return {
    event_id: 'evt_01J9X8A7P3Q4K5M6N7R8S9T0U1',
    event_type: 'theme.updated',
    event_version: 1,
    occurred_at: '2026-08-27T10:15:30Z',
    delivery_attempt: 1,
    tenant_id: 'tenant_acme',
    idempotency_key: 'theme:thm_123:v42',
    resource: { type: 'theme', id: 'thm_123', version: 42 },
    data: sampleThemeSnapshot(),
  };
}

/**
 * A valid theme.updated event. The default version is the current time in milliseconds so
 * that repeated demo sends for the same theme are applied in order instead of being reported
 * as duplicate versions.
 */
export function sampleThemeEvent(overrides: SampleThemeEventOverrides = {}): EventEnvelope {
  const { resource, ...rest } = overrides;
  return {
    event_id: `evt_${randomUUID()}`,
    event_type: 'theme.updated',
    event_version: 1,
    occurred_at: new Date().toISOString(),
    delivery_attempt: 1,
    tenant_id: 'tenant_acme',
    data: sampleThemeSnapshot(),
    ...rest,
    resource: { type: 'theme', id: 'thm_minimal-dark', version: Date.now(), ...resource },
  };
}
