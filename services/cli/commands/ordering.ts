import { RESOURCE_TYPE_PATTERN } from '#domain/contract/index.ts';
import { switchOrdering, type OrderingSwitchReport } from '#domain/operations/ordering-switch.ts';
import { RESOURCE_ORDERINGS, type ResourceOrdering } from '#domain/sources/index.ts';
import { flag, intOption, requiredOption, stringOption, UsageError } from '../args.ts';
import type { CommandSpec } from '../command.ts';

export const orderingSwitch: CommandSpec = {
  path: ['ordering', 'switch'],
  summary: "switch a resource type's stored resources to the other ordering (version or occurred_at)",
  usage: '--type T [--tenant X] --to occurred_at|version',
  details: [
    'A resource lives by one ordering, recorded with its state; the worker dead-letters an event of the other',
    'ordering (reason ordering_mismatch) instead of applying it. This re-stamps every stored resource of the type',
    "(of one tenant, or of all) in one transaction; applies wait for it. To occurred_at: each resource's time is",
    "its last applied event's occurred_at (from the inbox), so a late older event stays stale. To version: the",
    'stored version is kept; a resource that never had one takes its first versioned event. Resources left',
    'without the new key are counted. Rows already ordered that way are left alone: running it again changes',
    'nothing. Then change the ordering in the sources file of every ingress, and replay the dead-lettered',
    'ordering_mismatch events (docs/operations.md, "Switching a type\'s ordering"). --dry-run counts and changes nothing.',
  ].join('\n'),
  examples: [
    'bridge ordering switch --type palette --to occurred_at --dry-run',
    'bridge ordering switch --type palette --tenant tenant_acme --to occurred_at',
    'bridge ordering switch --type theme --to version --json',
  ],
  options: {
    type: { type: 'string', valueName: 'T', description: 'the resource type to switch' },
    tenant: { type: 'string', valueName: 'X', description: "only this tenant's resources (default: every tenant's)" },
    to: { type: 'string', valueName: 'ORDERING', description: 'the ordering to switch to: occurred_at or version' },
    'lock-timeout-ms': {
      type: 'string',
      valueName: 'N',
      description: 'how long to wait for the applies in flight before giving up (default 10000)',
    },
  },
  mutating: true,
  async run(args, ctx) {
    const type = requiredOption(args, 'type');
    if (!RESOURCE_TYPE_PATTERN.test(type)) throw new UsageError(`--type must match ${RESOURCE_TYPE_PATTERN.source}, got "${type}"`);
    const to = requiredOption(args, 'to');
    if (!(RESOURCE_ORDERINGS as readonly string[]).includes(to))
      throw new UsageError(`--to must be one of ${RESOURCE_ORDERINGS.join(', ')}, got "${to}"`);
    const tenant = stringOption(args, 'tenant');
    const lockTimeoutMs = intOption(args, 'lock-timeout-ms', 1);
    const report = await switchOrdering(ctx.pool(), {
      type,
      tenant,
      to: to as ResourceOrdering,
      dryRun: flag(args, 'dry-run'),
      ...(lockTimeoutMs === undefined ? {} : { lockTimeoutMs }),
    });
    ctx.out.result(reportJson(report), describe(report));
  },
};

function reportJson(r: OrderingSwitchReport) {
  return { dry_run: r.dryRun, type: r.type, tenant: r.tenant, from: r.from, to: r.to, rows: r.rows, without_key: r.withoutKey };
}

function describe(r: OrderingSwitchReport): string {
  const scope = `${r.type} (${r.tenant === null ? 'every tenant' : `tenant ${r.tenant}`})`;
  const lines = [`${scope}: ${r.rows} resource(s) ${r.dryRun ? 'would switch' : 'switched'} from ${r.from} to ${r.to}`];
  if (r.withoutKey > 0)
    lines.push(
      r.to === 'version'
        ? `  ${r.withoutKey} without a stored version: the first versioned event of each applies`
        : `  ${r.withoutKey} without a known occurred_at (the last event's inbox row is gone): the first time-ordered event of each applies`,
    );
  if (r.dryRun) lines.push('(dry run: nothing changed)');
  else
    lines.push(
      `next: set ${r.type}'s ordering to ${r.to} in the sources file of every ingress, then replay the dead letters with reason ordering_mismatch`,
    );
  return lines.join('\n');
}
