import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import { collectProcessMetrics } from '#plumbing/observability/process-metrics.ts';
import { RETENTION_TARGETS, type RetentionBatch, type RetentionRunReport } from '#domain/retention/index.ts';

export interface WorkerMetrics {
  processed: Counter<'outcome'>;
  duplicates: Counter;
  stale: Counter;
  versionGaps: Counter;
  latency: Histogram;
  queueLag: Gauge<'partition'>;
  outboxAge: Gauge;
  relayPublished: Counter;
  batchDuration: Histogram;
  transactionEvents: Histogram;
  retentionRows: Counter<'table' | 'action'>;
  retentionRuns: Counter<'result'>;
  retentionLastSuccess: Gauge;
  reconciliations: Counter<'trigger' | 'outcome'>;
  reconcilePullsOpen: Gauge<'status'>;
}

/** Registers on the registry it is given (one per worker instance), never the global one. */
export function createWorkerMetrics(registry: Registry, outboxAge: () => Promise<number>): WorkerMetrics {
  const registers = [registry];
  collectProcessMetrics(registry);
  return {
    processed: new Counter({
      name: 'webhook_events_processed_total',
      help: 'Events consumed from the events topic, by outcome',
      labelNames: ['outcome'],
      registers,
    }),
    duplicates: new Counter({
      name: 'webhook_duplicates_total',
      help: 'Deliveries recognised as duplicates (same event_id or same idempotency_key)',
      registers,
    }),
    stale: new Counter({
      name: 'webhook_stale_events_total',
      help: 'Events older than the stored version, ignored',
      registers,
    }),
    versionGaps: new Counter({
      name: 'webhook_version_gaps_total',
      help: 'Applied events whose version is more than one above the stored version',
      registers,
    }),
    latency: new Histogram({
      name: 'webhook_processing_latency_seconds',
      help: 'From the record timestamp to the commit of its transaction',
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
      registers,
    }),
    queueLag: new Gauge({
      name: 'webhook_queue_lag',
      help: 'Records behind the high watermark, per partition of the events topic',
      labelNames: ['partition'],
      registers,
    }),
    outboxAge: new Gauge({
      name: 'webhook_outbox_age_seconds',
      help: 'Age of the oldest applied record not yet published to the applied topic',
      registers,
      async collect() {
        try {
          this.set(await outboxAge());
        } catch {
          // A scrape during a database outage keeps the last value rather than failing /metrics.
        }
      },
    }),
    relayPublished: new Counter({
      name: 'webhook_applied_published_total',
      help: 'Applied records published to the applied topic by the outbox relay',
      registers,
    }),
    batchDuration: new Histogram({
      name: 'webhook_apply_batch_seconds',
      help: 'Duration of one apply transaction of the events topic consumer (the partition chunks it merged)',
      buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
      registers,
    }),
    transactionEvents: new Histogram({
      name: 'webhook_apply_transaction_events',
      help: 'Records in one apply transaction of the events topic consumer (small when idle, up to WORKER_BATCH_SIZE under load)',
      buckets: [1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500],
      registers,
    }),
    retentionRows: retentionRows(registers),
    retentionRuns: new Counter({
      name: 'webhook_retention_runs_total',
      help: 'Retention runs, by result (complete, time_limit, stopped, skipped: another process was pruning, failed)',
      labelNames: ['result'],
      registers,
    }),
    retentionLastSuccess: new Gauge({
      name: 'webhook_retention_last_success_timestamp_seconds',
      help: 'When the last retention run of this process ended without error (complete or time_limit); 0 before the first',
      registers,
    }),
    reconciliations: new Counter({
      name: 'reconciliations_total',
      help: 'Snapshots pulled from a provider API, by trigger (gap, unseen, quarantine) and outcome (applied, stale, gone, failed, circuit_open, invalid, implausible, dropped, error, exhausted)',
      labelNames: ['trigger', 'outcome'],
      registers,
    }),
    reconcilePullsOpen: new Gauge({
      name: 'reconciliations_open',
      help: 'Pulls recorded in reconcile_pulls, by status (pending, retrying: owed; gone, failed: waiting for an operator)',
      labelNames: ['status'],
      registers,
    }),
  };
}

function retentionRows(registers: Registry[]): Counter<'table' | 'action'> {
  const counter = new Counter({
    name: 'webhook_retention_rows_total',
    help: 'Rows retention changed, by table and action (pruned_body: raw body removed, row kept; deleted)',
    labelNames: ['table', 'action'],
    registers,
  });
  // Every series exists from the start, so rate() and alerts see 0 rather than nothing.
  for (const { table, action } of RETENTION_TARGETS) counter.inc({ table, action }, 0);
  return counter;
}

/** What the retention loop reports, as metrics (counted per batch, so a long run shows progress). */
export function retentionObserver(metrics: WorkerMetrics): {
  onBatch: (batch: RetentionBatch) => void;
  onRun: (report: RetentionRunReport) => void;
} {
  return {
    onBatch: (batch) => metrics.retentionRows.inc({ table: batch.table, action: batch.action }, batch.rows),
    onRun: (report) => {
      metrics.retentionRuns.inc({ result: report.result });
      if (report.result === 'complete' || report.result === 'time_limit') metrics.retentionLastSuccess.set(Date.now() / 1000);
    },
  };
}

/**
 * SOURCES_FROM=postgres: the configuration version this worker serves (-1 before its first load),
 * so a laggard shows on the dashboard, and whether its last check of that version reached Postgres.
 */
export function registerConfigMetrics(registry: Registry, live: { readonly version: number; readonly healthy: boolean }): void {
  new Gauge({
    name: 'bridge_config_version',
    help: 'The sources configuration version this process serves (-1 before its first load)',
    registers: [registry],
    collect() {
      this.set(live.version);
    },
  });
  new Gauge({
    name: 'bridge_config_source_healthy',
    help: '1 when the last check of the sources configuration reached Postgres, else 0 (the loaded set is kept)',
    registers: [registry],
    collect() {
      this.set(live.healthy ? 1 : 0);
    },
  });
}
