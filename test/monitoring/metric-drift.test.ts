import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseEnv } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import { repoRoot } from '../kit/infra.ts';
import { useTestDatabase } from '../kit/db.ts';
import { testBrokers, testKafka, useTestTopics } from '../kit/kafka.ts';
import { uniqueName } from '../kit/names.ts';
import { type ServiceProcess, useService } from '../kit/service.ts';

// The dashboard and the alerting rules name metrics; the running services must export every one
// of them, so a renamed or removed metric fails here instead of leaving an empty panel or an
// alert that can never fire.
const monitoring = path.join(repoRoot, 'infra', 'provision', 'monitoring');
const devEnv = parseEnv(readFileSync(path.join(repoRoot, 'infra', 'dev', 'dev.env'), 'utf8')) as Record<string, string>;

/** The bridge's own metric names in a PromQL text (its metrics start with these prefixes). */
export function metricNamesIn(text: string): Set<string> {
  return new Set([...text.matchAll(/\b(?:webhook|dead_letter|reconciliations|bridge)_[a-z0-9_]*/g)].map((m) => m[0]));
}

function dashboardExpressions(): string[] {
  const dashboard = JSON.parse(readFileSync(path.join(monitoring, 'grafana', 'theme-bridge.json'), 'utf8')) as {
    panels: Array<{ targets?: Array<{ expr: string }> }>;
  };
  return dashboard.panels.flatMap((p) => (p.targets ?? []).map((t) => t.expr));
}

/** Metric families a /metrics page declares (`# TYPE name kind`), histogram series names included. */
function exported(page: string): Set<string> {
  const names = new Set<string>();
  for (const m of page.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
    names.add(m[1]!);
    if (m[2] === 'histogram') for (const suffix of ['_bucket', '_sum', '_count']) names.add(`${m[1]}${suffix}`);
  }
  return names;
}

/** The service's /metrics page, once its admin server listens. */
async function metricsOf(service: ServiceProcess): Promise<string> {
  const response = await fetch(`http://127.0.0.1:${await service.adminPort()}/metrics`);
  return response.text();
}

describe('dashboard and alerts name only metrics the running services export', () => {
  const db = useTestDatabase();
  const { names } = useTestTopics(testKafka(), { eventsPartitions: 1 });
  const common = () => ({
    KAFKA_BROKERS: testBrokers().join(','),
    TOPIC_EVENTS: names.events,
    TOPIC_APPLIED: names.applied,
    ADMIN_PORT: '0',
  });
  const ingress = useService('ingress', () => {
    // A source in the middle of a secret rotation, so the rotation gauge has a sample.
    const sourcesFile = path.join(mkdtempSync(path.join(tmpdir(), 'bridge-sources-')), 'sources.json');
    const secrets = [
      { id: 'k_new', env: 'DEMO_SECRET' },
      { id: 'k_old', env: 'DEMO_SECRET', retireAfter: '2027-02-01T00:00:00Z' },
    ];
    writeFileSync(sourcesFile, JSON.stringify({ sources: [{ id: 'rotating', secrets, tenants: ['tenant_acme'] }] }));
    return { ...devEnv, ...common(), WEBHOOK_SOURCES_FILE: sourcesFile, PORT: '0', HOST: '127.0.0.1' };
  });
  const worker = useService('worker', () => ({ ...common(), DATABASE_URL: db.url, CONSUMER_GROUP: uniqueName('theme-applier') }));
  let pages: string[] = [];

  beforeAll(async () => {
    pages = await Promise.all([metricsOf(ingress), metricsOf(worker)]);
  });

  it('every metric of the Grafana dashboard is exported', () => {
    const wanted = metricNamesIn(dashboardExpressions().join('\n'));
    expect(wanted.size).toBeGreaterThan(20);
    const have = new Set(pages.flatMap((p) => [...exported(p)]));
    expect([...wanted].filter((name) => !have.has(name))).toEqual([]);
  });

  it('the ingress exports when a rotating secret should retire (the alert BridgeRetiringSecretStillInUse reads it)', () => {
    expect(pages[0]).toContain('webhook_secret_retire_after_timestamp_seconds{source="rotating",secret_id="k_old"} 1801440000');
    expect(pages[0]).not.toContain('secret_id="k_new"} ');
  });

  it('an ingress reading the sources file serves configuration version 0, healthy (BridgeConfigLagging and BridgeConfigSourceUnreachable stay quiet)', () => {
    expect(pages[0]).toMatch(/^bridge_config_version 0$/m);
    expect(pages[0]).toMatch(/^bridge_config_source_healthy 1$/m);
  });

  it('every metric of the alerting rules is exported', () => {
    const wanted = metricNamesIn(readFileSync(path.join(monitoring, 'prometheus', 'bridge-alerts.yml'), 'utf8'));
    expect(wanted.size).toBeGreaterThan(8);
    const have = new Set(pages.flatMap((p) => [...exported(p)]));
    expect([...wanted].filter((name) => !have.has(name))).toEqual([]);
  });
});
