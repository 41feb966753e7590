// The COPY ceiling's standalone comparison (bench/worker/copy-ceiling.ts): the same prebuilt rows
// through the store's own statements, one layer at a time, and a digest of the rows a run leaves.
import pg from 'pg';
import { SnapshotApplier } from '#domain/apply/index.ts';
import type { SourceRecord } from '#domain/apply/types.ts';
import { BEGIN_APPLY_TRANSACTION } from '#domain/store/chunk.ts';
import { cpuSince, cpuSnapshot } from '../lib/cpu.ts';
import type { CopyPlan } from './copy-plan.ts';
import { backendCpuSeconds, type CopyCeilingRound } from './copy-write.ts';

export type StoreLayer = 'write' | 'lock+write' | 'lock+read+write' | 'apply path';

export interface StoreLayerOptions {
  url: string;
  concurrency: number;
  /** The records the plan was built from, per lane, in chunks. */
  lanes: readonly (readonly SourceRecord[][])[];
  plan: CopyPlan;
}

/** The same rows through the store's statements up to `layer` (pool clients' backends are measured). */
export async function runStoreLayer(
  layer: StoreLayer,
  { url, concurrency, lanes, plan }: StoreLayerOptions,
): Promise<Pick<CopyCeilingRound, 'ms' | 'rate' | 'cpu' | 'backendCpu'>> {
  // No idle timeout: a backend that exits takes its CPU figure with it.
  const pool = new pg.Pool({ connectionString: url, max: concurrency, idleTimeoutMillis: 0, application_name: 'bench-copy-layers' });
  const pids = new Set<number>();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      const c = await pool.connect();
      pids.add((await c.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid);
      return c;
    }),
  ).then((cs) => cs.forEach((c) => c.release()));
  const applier = new SnapshotApplier({ pool });
  const backend0 = [...pids].reduce((s, p) => s + backendCpuSeconds(p), 0);
  const cpuBefore = cpuSnapshot();
  const ownBefore = process.cpuUsage();
  const started = performance.now();
  const queue = lanes.map((chunks, i) => ({ chunks, planned: plan.lanes[i]! }));
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      for (let next = queue.shift(); next; next = queue.shift()) {
        for (let i = 0; i < next.chunks.length; i += 1) {
          const chunk = next.planned[i]!;
          if (layer === 'apply path') {
            await applier.applyBatch(next.chunks[i]!);
            continue;
          }
          const client = await pool.connect();
          try {
            // The store's statements as the applier sends them, parameters encoded beforehand.
            const { lock, read, write } = chunk.statements!;
            // BEGIN alone, or BEGIN with the key locks in one round trip (as the applier sends them).
            await client.query(layer === 'write' ? BEGIN_APPLY_TRANSACTION : lock);
            if (layer === 'lock+read+write') await client.query(read);
            await client.query(write);
            await client.query('COMMIT');
          } finally {
            client.release();
          }
        }
      }
    }),
  );
  const ms = performance.now() - started;
  const own = process.cpuUsage(ownBefore);
  const cpu = { ...cpuSince(cpuBefore, cpuSnapshot()), child: (own.user + own.system) / 1e6 };
  const backendCpu = [...pids].reduce((s, p) => s + backendCpuSeconds(p), 0) - backend0;
  await pool.end();
  return { ms, rate: plan.events / (ms / 1000), cpu, backendCpu };
}

/** Every run must leave the same rows (apart from ids, transaction ids, times and applied_at). */
export async function rowsDigest(url: string): Promise<string> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  const { rows } = await c.query<Record<string, string | number>>(`SELECT
    (SELECT md5(string_agg((tenant_id, event_id, idempotency_key, duplicate_of, resource_type, resource_id, resource_version,
       event_type, status, reason, attempts, last_error, body_sha256, payload, source_topic, source_partition, source_offset,
       occurred_at, received_at, delivery_attempt, source, reconcile_trigger, fingerprint, trace_id)::text, E'\\n' ORDER BY tenant_id, event_id))
     FROM inbox_events) AS inbox,
    (SELECT md5(string_agg((tenant_id, resource_type, resource_id, version, deleted, data, last_event_id)::text, E'\\n'
       ORDER BY tenant_id, resource_type, resource_id)) FROM resource_state) AS state,
    (SELECT md5(string_agg((event_id, key, source_topic, source_partition, source_offset,
       regexp_replace(payload, '"applied_at":"[^"]*"', ''), traceparent, tracestate)::text, E'\\n' ORDER BY key, id))
     FROM applied_outbox) AS outbox,
    (SELECT count(*)::int FROM inbox_anomalies) AS anomalies,
    (SELECT count(*)::int FROM inbox_events) AS inbox_rows,
    (SELECT count(*)::int FROM resource_state) AS state_rows,
    (SELECT count(*)::int FROM applied_outbox) AS outbox_rows`);
  await c.end();
  return JSON.stringify(rows[0]);
}
