import type { Admin } from '#plumbing/kafka/types.ts';
import { SnapshotApplier, toSourceRecord, type ApplyOutcome } from '#domain/apply/index.ts';
import { CommandFailed, flag, intOption, parsePosition, requiredOption, stringOption, UsageError, type Position } from '../args.ts';
import type { CommandSpec } from '../command.ts';
import { connectedAdmin } from '../context.ts';
import { renderTable } from '../output.ts';
import { clampRanges, readRange, type PartitionRange } from '#plumbing/kafka/topic-reader.ts';

const OUTCOMES: ApplyOutcome[] = ['applied', 'stale', 'duplicate', 'duplicate_version', 'quarantined', 'ordering_mismatch', 'invalid'];
const CHUNK = 200;
const APPLY_ATTEMPTS = 3;

function checkOrder(from: Position, to: Position | undefined): void {
  if (!to || from.kind !== to.kind) return;
  const before =
    from.kind === 'offset' && to.kind === 'offset'
      ? to.offset < from.offset
      : (to as { timestamp: number }).timestamp < (from as { timestamp: number }).timestamp;
  if (before) throw new UsageError('--to must not be before --from');
}

/** Resolves --from/--to into exact [from, to) offsets per partition, clamped to what the log holds. */
export async function resolveRanges(
  admin: Admin,
  topic: string,
  partitions: number[] | undefined,
  from: Position,
  to: Position | undefined,
): Promise<PartitionRange[]> {
  const watermarks = (await admin.fetchTopicOffsets(topic)).filter((w) => !partitions || partitions.includes(w.partition));
  // A time with no record at or after it resolves to the log end (nothing to read from there).
  const at = async (position: Position): Promise<Map<number, bigint>> => {
    if (position.kind === 'offset') return new Map(watermarks.map((w) => [w.partition, position.offset]));
    const byTime = await admin.fetchTopicOffsetsByTimestamp(topic, position.timestamp);
    return new Map(
      watermarks.map((w) => {
        const found = byTime.find((b) => b.partition === w.partition)?.offset;
        return [w.partition, found !== undefined && BigInt(found) >= 0n ? BigInt(found) : BigInt(w.high)];
      }),
    );
  };
  const starts = await at(from);
  const ends = to ? await at(to) : new Map(watermarks.map((w) => [w.partition, BigInt(w.high)]));
  return clampRanges(
    watermarks.map((w) => ({ partition: w.partition, from: starts.get(w.partition)!, to: ends.get(w.partition)! })),
    watermarks,
  ).sort((a, b) => a.partition - b.partition);
}

export const reprocessCommand: CommandSpec = {
  path: ['reprocess'],
  summary: 'feed a range of a topic through the apply path again (idempotent, version-checked); counts by outcome',
  usage: '--topic T [--partition P] --from <offset|ISO time> [--to <offset|ISO time>] [--dry-run]',
  details: [
    'Reads [from, to) with a short-lived consumer in a throwaway group that never commits, so the',
    "workers' group is untouched, and applies each record with the same SnapshotApplier the worker uses.",
    'An offset applies to every selected partition; a time means the first record at or after it.',
    '--to is exclusive and defaults to the end of the log when the command starts.',
    'Already applied events come back as duplicate: to rebuild lost state, its inbox rows must be gone too.',
    '--dry-run reads and counts the records and applies nothing.',
  ].join('\n'),
  examples: [
    'bridge reprocess --topic theme.events --from 2026-01-31T12:00:00Z --to 2026-01-31T13:00:00Z',
    'bridge reprocess --topic theme.events --partition 3 --from 1200 --dry-run',
  ],
  options: {
    topic: { type: 'string', description: 'topic to read (usually the events topic)', valueName: 'T' },
    partition: { type: 'string', description: 'only this partition (default: all)', valueName: 'P' },
    from: { type: 'string', description: 'first offset, or ISO time with an explicit offset (Z or ±HH:MM)', valueName: 'offset|time' },
    to: {
      type: 'string',
      description: 'end (exclusive) offset or ISO time with an explicit offset (Z or ±HH:MM) (default: log end now)',
      valueName: 'offset|time',
    },
  },
  mutating: true,
  async run(args, ctx) {
    const topic = requiredOption(args, 'topic');
    const partition = intOption(args, 'partition');
    const from = parsePosition(requiredOption(args, 'from'), 'from');
    const toText = stringOption(args, 'to');
    const to = toText === undefined ? undefined : parsePosition(toText, 'to');
    checkOrder(from, to);
    const dryRun = flag(args, 'dry-run');

    const admin = await connectedAdmin(ctx);
    if (!(await admin.listTopics()).includes(topic)) throw new CommandFailed(`topic ${topic} does not exist`);
    if (partition !== undefined) {
      const known = (await admin.fetchTopicOffsets(topic)).map((w) => w.partition);
      if (!known.includes(partition)) throw new UsageError(`topic ${topic} has no partition ${partition}`);
    }
    const ranges = await resolveRanges(admin, topic, partition === undefined ? undefined : [partition], from, to);
    const applier = dryRun ? undefined : new SnapshotApplier({ pool: ctx.pool() });
    const outcomes: Record<string, number> = Object.fromEntries(OUTCOMES.map((o) => [o, 0]));
    const perPartition = new Map<number, number>();
    const started = Date.now();
    ctx.out.note(
      `${dryRun ? 'counting' : 'reprocessing'} ${topic}: ${ranges.map((r) => `p${r.partition} [${r.from}, ${r.to})`).join(', ') || 'nothing in range'}`,
    );

    await readRange({
      kafka: ctx.kafka(),
      admin,
      topic,
      ranges: ranges.map((r) => ({ ...r })),
      groupPrefix: 'bridge-cli-reprocess',
      // Counted only once applied (or, in a dry run, read) and marked handled right after, so a
      // rebalance in the middle of a batch never counts or applies a chunk twice.
      onRecords: async (records, heartbeat, handled) => {
        const p = records[0]!.partition;
        const count = (n: number) => perPartition.set(p, (perPartition.get(p) ?? 0) + n);
        if (!applier) {
          count(records.length);
          return;
        }
        for (let i = 0; i < records.length; i += CHUNK) {
          const read = records.slice(i, i + CHUNK);
          const chunk = read.map((r) => toSourceRecord(r.topic, r.partition, r.message));
          for (let attempt = 1; ; attempt += 1) {
            try {
              const results = await applier.applyBatch(chunk);
              for (const r of results) outcomes[r.outcome] = (outcomes[r.outcome] ?? 0) + 1;
              break;
            } catch (error) {
              if (attempt >= APPLY_ATTEMPTS) {
                throw new CommandFailed(
                  `applying ${topic}/${p} from offset ${chunk[0]!.offset} failed ${attempt} times: ${(error as Error).message}; ` +
                    'records before it were applied; rerun from that offset',
                  { partition: p, offset: chunk[0]!.offset, outcomes },
                );
              }
              await new Promise((resolve) => setTimeout(resolve, 200 * attempt));
            }
          }
          count(read.length);
          handled(read[read.length - 1]!);
          await heartbeat();
        }
      },
    });

    const total = [...perPartition.values()].reduce((a, b) => a + b, 0);
    const partitions = ranges.map((r) => ({
      partition: r.partition,
      from: r.from.toString(),
      to: r.to.toString(),
      records: perPartition.get(r.partition) ?? 0,
    }));
    const data = { topic, dry_run: dryRun, records: total, ...(dryRun ? {} : { outcomes }), partitions, duration_ms: Date.now() - started };
    ctx.out.result(
      data,
      [
        renderTable(
          ['partition', 'from', 'to (excl.)', 'records'],
          partitions.map((p) => [p.partition, p.from, p.to, p.records]),
        ),
        '',
        dryRun
          ? `${total} records in range (dry run: nothing applied)`
          : `${total} records reprocessed: ${OUTCOMES.map((o) => `${o} ${outcomes[o]}`).join(', ')}`,
      ].join('\n'),
    );
  },
};
