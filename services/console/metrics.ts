// The console's own metrics (GET /metrics): what an alert needs that only the console looks at.
// Dead letters near the DLQ topic's retention: once the broker deletes one it cannot be replayed,
// so the gauge rises before that happens. Read from the broker at each scrape (time index and
// topic config only, no record).
import { Gauge, Registry } from 'prom-client';
import type { DlqExpiry } from '#domain/operations/dlq-window.ts';
import type { Part } from './readers.ts';

export function consoleMetrics(readExpiry: () => Promise<Part<DlqExpiry>>): Registry {
  const registry = new Registry();
  let last: Promise<Part<DlqExpiry>> | undefined;
  // One broker read per scrape, shared by the gauges collected in it.
  const expiry = () => (last ??= readExpiry().finally(() => setTimeout(() => (last = undefined), 0)));
  new Gauge({
    name: 'dead_letter_expiring_records',
    help: 'Dead letters the broker may delete within CONSOLE_DLQ_EXPIRY_WARNING_DAYS (the DLQ topic retention.ms); a deleted one cannot be replayed. NaN when the broker does not answer.',
    registers: [registry],
    async collect() {
      const e = await expiry();
      this.set(e.ok ? e.value.expiring : Number.NaN);
    },
  });
  new Gauge({
    name: 'dead_letter_retention_seconds',
    help: "The DLQ topic's retention.ms in seconds (-1: kept forever).",
    registers: [registry],
    async collect() {
      const e = await expiry();
      this.set(e.ok ? (e.value.retentionMs === undefined ? -1 : e.value.retentionMs / 1000) : Number.NaN);
    },
  });
  return registry;
}
