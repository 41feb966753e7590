import { randomUUID } from 'node:crypto';
import type { EventEnvelope } from './envelope.ts';
import type { ThemeSnapshot } from './theme-snapshot.ts';

export type SampleThemeEventOverrides = Partial<Omit<EventEnvelope, 'resource'>> & {
  resource?: Partial<EventEnvelope['resource']>;
};

export function sampleThemeSnapshot(): ThemeSnapshot {
  return {
    slug: 'aurora-night',
    name: 'Aurora Night',
    status: 'published',
    palette: {
      primary: '#3B82F6',
      secondary: '#10B981',
      background: '#0F172A',
      surface: '#1E293B',
      text: '#F8FAFC',
      accent: '#F59E0B',
    },
    layout: { clockStyle: 'digital', showSeconds: true, timezone: 'Europe/Berlin' },
    assets: [
      {
        type: 'image',
        url: 'https://cdn.example.com/themes/aurora-night/background.webp',
        sha256: '9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08',
      },
      {
        type: 'font',
        url: 'https://cdn.example.com/fonts/inter-variable.woff2',
        sha256: '2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae',
      },
    ],
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
    resource: { type: 'theme', id: 'theme_aurora-night', version: Date.now(), ...resource },
  };
}
