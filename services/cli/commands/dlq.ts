import { flag, CommandFailed, parseIsoTime, stringOption, TIME_HELP, UsageError, type ParsedArgs } from '../args.ts';
import type { CommandSpec } from '../command.ts';
import { connectedAdmin, type CliContext } from '../context.ts';
import {
  deadLetteredAt,
  entryReason,
  filterEntries,
  headersAsText,
  latestPerEvent,
  matchesRef,
  parseDlqRef,
  type DlqEntry,
  type DlqFilter,
} from '#domain/operations/dlq-records.ts';
import {
  inboxStatuses,
  readDlq as readDlqTopic,
  replayDeadLetters,
  replayPlan,
  statusOf,
  type DlqClients,
  type InboxStatus,
} from '#domain/operations/dlq-replay/index.ts';
import { renderTable } from '../output.ts';

async function dlqClients(ctx: CliContext): Promise<DlqClients> {
  return { kafka: ctx.kafka(), admin: await connectedAdmin(ctx), names: ctx.topicNames(), group: ctx.consumerGroup(), logger: ctx.logger };
}

/** Every record on the DLQ now, oldest first. */
async function readDlq(ctx: CliContext): Promise<{ topic: string; entries: DlqEntry[] }> {
  const read = await readDlqTopic(await dlqClients(ctx), 'bridge-cli-dlq');
  if (!read) throw new CommandFailed(`DLQ topic ${ctx.topicNames().dlq} does not exist`);
  return read;
}

/** The inbox status is a bonus in list/show: without DATABASE_URL they still work from Kafka alone. */
async function optionalStatuses(ctx: CliContext, entries: readonly DlqEntry[]): Promise<Map<string, InboxStatus> | undefined> {
  if (!ctx.env.DATABASE_URL) return undefined;
  try {
    return await inboxStatuses(ctx.pool(), entries);
  } catch (error) {
    ctx.out.note(`warning: inbox status unavailable (${(error as Error).message})`);
    return undefined;
  }
}

function filterFrom(args: ParsedArgs): DlqFilter {
  const sinceText = stringOption(args, 'since');
  let since: number | undefined;
  if (sinceText !== undefined) {
    since = parseIsoTime(sinceText, 'since');
    if (since === undefined) throw new UsageError(`--since must be ${TIME_HELP}, got "${sinceText}"`);
  }
  const reason = stringOption(args, 'reason');
  return { ...(since === undefined ? {} : { since }), ...(reason === undefined ? {} : { reason }) };
}

function summary(e: DlqEntry, status: InboxStatus | undefined) {
  return {
    partition: e.partition,
    offset: e.offset,
    event_id: e.eventId,
    key: e.key?.toString('utf8') ?? null,
    reason: entryReason(e),
    attempt: e.info?.attempt ?? null,
    dead_lettered_at: new Date(deadLetteredAt(e)).toISOString(),
    failed_topic: e.info?.failedTopic ?? null,
    original: e.info ? { topic: e.info.originalTopic, partition: e.info.originalPartition, offset: e.info.originalOffset } : null,
    last_error: e.info ? `${e.info.lastErrorCode}: ${e.info.lastErrorMessage}` : null,
    inbox_status: status?.status ?? null,
    header_problem: e.problem,
  };
}

const filterOptions = {
  since: {
    type: 'string',
    description: 'only records dead-lettered at or after this ISO time, with an explicit offset (Z or ±HH:MM)',
    valueName: 'time',
  },
  reason: { type: 'string', description: 'only records with this dlq-reason (e.g. invalid_envelope, retries_exhausted)', valueName: 'R' },
} as const;

export const dlqList: CommandSpec = {
  path: ['dlq', 'list'],
  summary: 'list dead-lettered records (reason, attempts, original coordinates, current inbox status)',
  usage: '[--since T] [--reason R]',
  details:
    "Reads the whole DLQ topic without committing anything. With DATABASE_URL set it also shows each event's inbox status (e.g. applied after a replay).",
  examples: ['bridge dlq list', 'bridge dlq list --since 2026-01-31T00:00:00Z --reason retries_exhausted --json'],
  options: { ...filterOptions },
  mutating: false,
  async run(args, ctx) {
    const filter = filterFrom(args);
    const { topic, entries } = await readDlq(ctx);
    const selected = filterEntries(entries, filter);
    const statuses = await optionalStatuses(ctx, selected);
    const rows = selected.map((e) => summary(e, statusOf(statuses, e)));
    const reasons: Record<string, number> = {};
    for (const r of rows) reasons[r.reason] = (reasons[r.reason] ?? 0) + 1;
    ctx.out.result(
      { topic, total: entries.length, count: rows.length, reasons, records: rows },
      [
        renderTable(
          ['dead-lettered', 'partition:offset', 'event_id', 'reason', 'attempt', 'inbox', 'last error'],
          rows.map((r) => [
            r.dead_lettered_at,
            `${r.partition}:${r.offset}`,
            r.event_id,
            r.reason,
            r.attempt,
            r.inbox_status,
            r.last_error?.slice(0, 60),
          ]),
        ),
        '',
        `${rows.length} of ${entries.length} records on ${topic}${
          Object.keys(reasons).length
            ? ` (${Object.entries(reasons)
                .map(([k, v]) => `${k} ${v}`)
                .join(', ')})`
            : ''
        }`,
      ].join('\n'),
    );
  },
};

export const dlqShow: CommandSpec = {
  path: ['dlq', 'show'],
  summary: 'show one dead-lettered record in full: headers, failure details, key and body',
  usage: '<event_id|partition:offset>',
  details: 'An event dead-lettered more than once shows every record, newest first. Exit 1 when none matches.',
  examples: ['bridge dlq show evt_0f3c2d', 'bridge dlq show 3:1042 --json'],
  options: {},
  positionals: true,
  mutating: false,
  async run(args, ctx) {
    if (args.positionals.length !== 1) throw new UsageError('dlq show expects one <event_id|partition:offset>');
    const ref = parseDlqRef(args.positionals[0]!);
    const { topic, entries } = await readDlq(ctx);
    const matches = entries.filter((e) => matchesRef(e, ref)).reverse();
    if (matches.length === 0) throw new CommandFailed(`no record ${args.positionals[0]} on ${topic}`);
    const statuses = await optionalStatuses(ctx, matches);
    const records = matches.map((e) => {
      const body = e.value?.toString('utf8') ?? null;
      let bodyJson: unknown;
      try {
        bodyJson = body === null ? null : JSON.parse(body);
      } catch {
        bodyJson = undefined;
      }
      return { ...summary(e, statusOf(statuses, e)), headers: headersAsText(e.headers), body, body_json: bodyJson };
    });
    ctx.out.result(
      { topic, records: records.map(({ body_json: _b, ...r }) => r) },
      records
        .map((r) =>
          [
            `${topic} ${r.partition}:${r.offset}  event ${r.event_id ?? '(none)'}  key ${r.key ?? '(null)'}`,
            `reason: ${r.reason}   attempt: ${r.attempt ?? '-'}   dead-lettered: ${r.dead_lettered_at}   inbox: ${r.inbox_status ?? '-'}`,
            r.original
              ? `original: ${r.original.topic}/${r.original.partition}@${r.original.offset}   failed on: ${r.failed_topic}`
              : `headers: ${r.header_problem}`,
            r.last_error ? `last error: ${r.last_error}` : '',
            'headers:',
            ...Object.entries(r.headers).map(([k, v]) => `  ${k}: ${v}`),
            'body:',
            r.body_json !== undefined ? JSON.stringify(r.body_json, null, 2) : (r.body ?? '(null)'),
          ]
            .filter((l) => l !== '')
            .join('\n'),
        )
        .join('\n\n'),
    );
  },
};

export const dlqReplay: CommandSpec = {
  path: ['dlq', 'replay'],
  summary: 'republish dead-lettered records (original key, body and headers) to the events topic and report outcomes',
  usage: '(<event_id|partition:offset>... | --all [--reason R] [--since T]) [--no-wait] [--timeout-ms N]',
  details: [
    'Fix the cause first. Each selected record goes back to the events topic as the ingress produced it',
    '(plus a replayed-from header); an event dead-lettered several times is replayed once. Then it waits',
    "for each event's inbox status to settle (needs DATABASE_URL): applied, stale, duplicate, ... count",
    'as done; dead-lettered again, quarantined or no answer before the timeout count as failed (exit 1).',
    'Unknown ids fail the command before anything is sent.',
  ].join('\n'),
  examples: [
    'bridge dlq replay evt_0f3c2d evt_9a1b7e',
    'bridge dlq replay --all --reason retries_exhausted --dry-run',
    'bridge dlq replay 3:1042 --no-wait',
  ],
  options: {
    all: { type: 'boolean', description: 'every record (narrowed by --reason / --since)' },
    ...filterOptions,
    'no-wait': { type: 'boolean', description: 'do not wait for the outcomes' },
    'timeout-ms': { type: 'string', description: 'how long to wait for outcomes (default 60000)', valueName: 'N' },
  },
  positionals: true,
  mutating: true,
  async run(args, ctx) {
    const all = flag(args, 'all');
    if (all && args.positionals.length > 0) throw new UsageError('give either event ids or --all, not both');
    if (!all && args.positionals.length === 0) throw new UsageError('give event ids (or partition:offset) to replay, or --all');
    if (!all && (args.values.reason !== undefined || args.values.since !== undefined))
      throw new UsageError('--reason and --since go with --all');
    const filter = filterFrom(args);
    const timeoutText = stringOption(args, 'timeout-ms') ?? '60000';
    if (!/^\d+$/.test(timeoutText)) throw new UsageError('--timeout-ms must be an integer');
    const wait = !flag(args, 'no-wait');
    const dryRun = flag(args, 'dry-run');
    const events = ctx.topicNames().events;

    const { topic, entries } = await readDlq(ctx);
    let selected: DlqEntry[];
    if (all) {
      selected = filterEntries(entries, filter);
    } else {
      const refs = args.positionals.map((text) => ({ text, ref: parseDlqRef(text) }));
      const missing = refs.filter(({ ref }) => !entries.some((e) => matchesRef(e, ref))).map((r) => r.text);
      if (missing.length > 0) throw new CommandFailed(`not on ${topic}: ${missing.join(', ')}; nothing was replayed`, { missing });
      selected = entries.filter((e) => refs.some(({ ref }) => matchesRef(e, ref)));
    }
    const toReplay = latestPerEvent(selected);
    const plan = replayPlan(toReplay);
    if (dryRun || toReplay.length === 0) {
      ctx.out.result(
        { dry_run: dryRun, to: events, count: plan.length, records: plan },
        `${renderTable(
          ['from', 'event_id', 'key', 'reason'],
          plan.map((p) => [p.from, p.event_id, p.key, p.reason]),
        )}\n${plan.length} record(s) ${dryRun ? `would be replayed to ${events} (dry run: nothing sent)` : 'selected: nothing to replay'}`,
      );
      return;
    }

    const outcomes = await replayDeadLetters(await dlqClients(ctx), wait ? ctx.pool() : undefined, toReplay, {
      wait,
      timeoutMs: Number(timeoutText),
      onSent: (sent, notSent) =>
        ctx.out.note(
          `replayed ${sent} record(s) to ${events}${notSent > 0 ? `; ${notSent} could not be sent` : ''}${wait && sent > 0 ? '; waiting for outcomes' : ''}`,
        ),
    });
    const failed = outcomes.filter((o) => !o.ok).length;
    const counts: Record<string, number> = {};
    for (const o of outcomes) counts[o.status] = (counts[o.status] ?? 0) + 1;
    ctx.out.result(
      { to: events, count: outcomes.length, failed, counts, outcomes },
      `${renderTable(
        ['from', 'event_id', 'outcome', 'detail'],
        outcomes.map((o) => [o.from, o.event_id, o.status, o.detail]),
      )}\n${outcomes.length} replayed: ${Object.entries(counts)
        .map(([k, v]) => `${k} ${v}`)
        .join(', ')}`,
    );
    return failed > 0 ? 1 : 0;
  },
};
