import { parseConfig } from '#plumbing/config/env.ts';
import {
  RetentionPruner,
  retentionEnv,
  retentionSettingsFrom,
  type RetentionCount,
  type RetentionSettings,
} from '#domain/retention/index.ts';
import { CommandFailed, flag, intOption } from '../args.ts';
import type { CommandSpec } from '../command.ts';
import { renderTable } from '../output.ts';

const countsJson = (counts: RetentionCount[]) =>
  counts.map((c) => ({ table: c.table, action: c.action, rows: c.rows, older_than: c.olderThan }));

const settingsJson = (s: RetentionSettings, maxSeconds: number) => ({
  body_days: s.bodyDays,
  inbox_days: s.inboxDays,
  outbox_days: s.outboxDays,
  batch_rows: s.batchRows,
  batch_bytes: s.batchBytes,
  pause_ms: s.pauseMs,
  max_seconds: maxSeconds === 0 ? null : maxSeconds,
});

const daysText = (d: number) => (d === 0 ? 'forever' : `${d} d`);

function settingsLine(s: RetentionSettings): string {
  return (
    `settings: bodies ${daysText(s.bodyDays)}, settled inbox rows and anomalies ${daysText(s.inboxDays)}, outbox ${daysText(s.outboxDays)}; ` +
    `batches of ${s.batchRows} rows (bodies up to ${s.batchBytes} bytes), ${s.pauseMs} ms apart`
  );
}

export const pruneCommand: CommandSpec = {
  path: ['prune'],
  summary: 'retention: prune old bodies and delete old inbox, anomaly and outbox rows (what the worker does every interval)',
  usage: '[--dry-run] [--max-seconds N]',
  details: [
    "The worker's own retention pass (shared/domain/retention), in batches of RETENTION_BATCH_ROWS, with the",
    "RETENTION_* settings of the environment (RETENTION_ENABLED only switches the worker's loop).",
    '--dry-run counts, per table, what a pass would prune or delete now and changes nothing.',
    'Without it: one pass to the end (or --max-seconds), then what it did. Exit 1 while another',
    'process (a worker) is pruning: only one pass runs at a time.',
  ].join('\n'),
  examples: ['bridge prune --dry-run', 'bridge prune --dry-run --json', 'bridge prune', 'bridge prune --max-seconds 300'],
  options: {
    'max-seconds': { type: 'string', valueName: 'N', description: 'start no batch after N seconds (default: no bound)' },
  },
  mutating: true,
  async run(args, ctx) {
    const settings = retentionSettingsFrom(parseConfig(retentionEnv, ctx.env));
    const maxSeconds = intOption(args, 'max-seconds', 1) ?? 0;
    const pruner = new RetentionPruner({ pool: ctx.pool(), settings });

    if (flag(args, 'dry-run')) {
      const plan = await pruner.plan();
      ctx.out.result(
        { dry_run: true, at: plan.at.toISOString(), settings: settingsJson(settings, maxSeconds), counts: countsJson(plan.counts) },
        [
          `would prune or delete now (${plan.at.toISOString()}):`,
          renderTable(
            ['table', 'action', 'rows', 'older than'],
            plan.counts.map((c) => [c.table, c.action, c.rows, c.olderThan ?? 'kept forever']),
          ),
          settingsLine(settings),
          '(dry run: nothing changed)',
        ].join('\n'),
      );
      return;
    }

    const report = await pruner.run({ maxSeconds });
    const data = {
      dry_run: false,
      settings: settingsJson(settings, maxSeconds),
      result: report.result,
      started_at: report.startedAt.toISOString(),
      seconds: Number(report.seconds.toFixed(3)),
      batches: report.batches,
      counts: countsJson(report.counts),
    };
    if (report.result === 'skipped') {
      throw new CommandFailed('another process is pruning (it holds the retention lock); nothing changed, try again shortly', data);
    }
    if (report.result === 'failed') {
      const message = report.error instanceof Error ? report.error.message : String(report.error);
      throw new CommandFailed(`retention failed after ${report.batches} batches (those stay done): ${message}`, data);
    }
    ctx.out.result(
      data,
      [
        renderTable(
          ['table', 'action', 'rows'],
          report.counts.map((c) => [c.table, c.action, c.rows]),
        ),
        `${report.result}: ${report.batches} batches in ${report.seconds.toFixed(1)} s` +
          (report.result === 'time_limit' ? ' (stopped at --max-seconds; run again for the rest)' : ''),
      ].join('\n'),
    );
  },
};
