import {
  createEventsPublisher,
  isNotConfigured,
  ON_DEMAND_DONE,
  reconcileOnDemand,
  resourceRefProblem,
  type ReconcileReport,
} from '#domain/reconcile/index.ts';
import { loadReconcileSources, reconcileSourcesFromDatabase, SourcesConfigError, type ReconcileSource } from '#domain/sources/index.ts';
import { CommandFailed, flag, stringOption, UsageError } from '../args.ts';
import type { CommandSpec } from '../command.ts';

export const reconcileCommand: CommandSpec = {
  path: ['reconcile'],
  summary: "pull one resource's snapshot from its provider's API and apply it through the worker",
  usage: '<tenant> <resource_type> <resource_id> [--source S]',
  details: [
    'GETs the resource from the `reconcile.url` of the source that owns the tenant and type (WEBHOOK_SOURCES_FILE,' +
      ' or the sources in Postgres with SOURCES_FROM=postgres;',
    "the auth header from its environment variable), with the source's timeout, retries, rate limit and breaker.",
    'A snapshot above the stored version is published to the events topic as an event from `reconcile`',
    "(trigger `operator`), with the provider's own version; the worker applies it like a webhook, so it reaches",
    'the applied topic. A version at or below the stored one is `stale` and nothing is sent. A 404/410 is `gone`',
    'and sends nothing, unless its body states the deletion\'s version (`{"version": n}`): then a tombstone at n.',
    "An answer that applies or is stale clears the resource's record of a pull the worker owes (console: /reconcile).",
    "On a type ordered by occurred_at (the state row's ordering, else the source's) the answer's own time",
    '(`occurred_at` or `updated_at`) orders it instead: not after the stored time is `stale`, and the event',
    'carries that time and the `ordered-by: occurred_at` header.',
    '--dry-run fetches and prints what would happen, publishing nothing. Ids the contract refuses are refused',
    'before any request (exit 2). Exit 1 when the API could not be reached (failed, circuit_open), its answer',
    'states another tenant, type or id, fails the contract or the strict schema, or states no time on a type',
    'ordered by occurred_at (invalid), or its version leads the highest known one (0 for a resource never seen)',
    "by more than the source's maxVersionLead, or its time leads this clock by more than maxFutureSkewSeconds",
    '(implausible).',
  ].join('\n'),
  examples: ['bridge reconcile tenant_acme theme thm_minimal-dark --dry-run', 'bridge reconcile tenant_acme theme thm_minimal-dark --json'],
  options: {
    source: { type: 'string', valueName: 'S', description: 'the source whose API to ask (default: the one owning tenant and type)' },
  },
  positionals: true,
  mutating: true,
  async run(args, ctx) {
    if (args.positionals.length !== 3) throw new UsageError('reconcile expects <tenant> <resource_type> <resource_id>');
    const [tenantId, type, id] = args.positionals as [string, string, string];
    // Before the sources file and any request: the API would get the source's credentials.
    const refused = resourceRefProblem({ tenantId, type, id });
    if (refused !== undefined) throw new UsageError(refused);
    const dryRun = flag(args, 'dry-run');
    const sourceId = stringOption(args, 'source');
    let sources: ReconcileSource[];
    try {
      // SOURCES_FROM=postgres: the sources the workers follow; else the sources file, as the worker reads it.
      if (ctx.env.SOURCES_FROM === 'postgres') sources = await reconcileSourcesFromDatabase(ctx.pool(), ctx.env);
      else {
        const file = ctx.env.WEBHOOK_SOURCES_FILE;
        if (!file)
          throw new CommandFailed(
            "WEBHOOK_SOURCES_FILE is not set (the sources file with each source's `reconcile` settings), nor SOURCES_FROM=postgres",
          );
        sources = loadReconcileSources(file, ctx.env);
      }
    } catch (error) {
      if (error instanceof SourcesConfigError) throw new CommandFailed(error.message);
      throw error;
    }
    // Config for the events topic is read up front (a bad KAFKA_BROKERS fails before any request);
    // the producer itself opens only when there is something to publish.
    const kafka = dryRun ? undefined : ctx.kafka();
    const topic = dryRun ? undefined : ctx.topicNames().events;
    let report: ReconcileReport;
    try {
      report = await reconcileOnDemand(
        {
          pool: ctx.pool(),
          sources,
          openPublisher: () => {
            if (!kafka || !topic) throw new Error('dry run publishes nothing');
            return createEventsPublisher(kafka, { topic, logger: ctx.logger });
          },
        },
        { tenantId, type, id, dryRun, ...(sourceId === undefined ? {} : { sourceId }) },
      );
    } catch (error) {
      if (isNotConfigured(error)) throw new CommandFailed(error.message);
      throw error;
    }
    const data = reportJson(report, dryRun);
    if (!ON_DEMAND_DONE.has(report.outcome))
      throw new CommandFailed(`${report.resourceKey}: ${report.outcome} (${report.reason ?? 'no reason'})`, data);
    ctx.out.result(data, describe(report, dryRun));
  },
};

function reportJson(report: ReconcileReport, dryRun: boolean) {
  return {
    dry_run: dryRun,
    resource_key: report.resourceKey,
    source: report.source,
    outcome: report.outcome,
    published: report.published,
    attempts: report.attempts,
    ordering: report.ordering ?? null,
    stored:
      report.storedVersion === null && (report.storedOccurredAt ?? null) === null
        ? null
        : { version: report.storedVersion, occurred_at: report.storedOccurredAt ?? null, deleted: report.storedDeleted },
    fetched: report.fetched ?? null,
    event: report.event ?? null,
    reason: report.reason ?? null,
  };
}

function describe(report: ReconcileReport, dryRun: boolean): string {
  const byTime = report.ordering === 'occurred_at';
  const storedAt = byTime && report.storedOccurredAt ? ` at ${report.storedOccurredAt}` : '';
  const stored =
    report.storedVersion === null && storedAt === ''
      ? 'nothing stored'
      : `stored ${report.storedVersion === null ? 'without a version' : `v${report.storedVersion}`}${storedAt}${report.storedDeleted ? ' (tombstone)' : ''}`;
  const fetched = report.fetched
    ? `GET ${report.fetched.url} -> ${report.fetched.status}${report.fetched.version === undefined ? '' : `, version ${report.fetched.version}`}` +
      (report.fetched.occurredAt === undefined ? '' : `, time ${report.fetched.occurredAt}`)
    : 'nothing fetched';
  const pulled = (event: NonNullable<ReconcileReport['event']>) =>
    byTime ? `occurred_at ${event.occurred_at}` : `v${event.resource.version}`;
  const verb = dryRun ? 'would publish' : 'published';
  const what =
    report.outcome === 'applied'
      ? `applied: ${verb} ${report.event!.event_type.endsWith('.deleted') ? 'a tombstone ' : ''}${pulled(report.event!)} to the events topic (event ${report.event!.event_id})`
      : `${report.outcome}: nothing to publish (${report.reason ?? ''})`;
  const order = report.ordering === undefined ? '' : ` (ordered by ${report.ordering})`;
  const lines = [`${report.resourceKey} via source ${report.source}${order}`, `  ${fetched}`, `  ${stored}`, `  ${what}`];
  if (report.fetched?.data !== undefined) lines.push(`  data: ${JSON.stringify(report.fetched.data)}`);
  if (dryRun) lines.push('(dry run: nothing changed)');
  return lines.join('\n');
}
