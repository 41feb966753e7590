import type { Registry } from 'prom-client';
import type pg from 'pg';
export { topicRecordCount as topicSize } from '../kit/kafka.ts';

/** The value of one sample of a metric (0 when absent). */
export async function metricValue(registry: Registry, name: string, labels: Record<string, string> = {}): Promise<number> {
  const metric = registry.getSingleMetric(name);
  if (!metric) return 0;
  const { values } = await metric.get();
  const match = values.find((v) => Object.entries(labels).every(([k, val]) => String(v.labels[k]) === val));
  return match?.value ?? 0;
}

export async function inboxRow(pool: pg.Pool, eventId: string) {
  const { rows } = await pool.query<{ status: string; reason: string | null; attempts: number; last_error: string | null }>(
    'SELECT status, reason, attempts, last_error FROM inbox_events WHERE event_id = $1',
    [eventId],
  );
  return rows[0];
}
