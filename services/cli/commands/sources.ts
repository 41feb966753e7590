// `bridge sources ...`: the sources kept in Postgres, through the same catalog the operator API and
// the console use (one transaction per write, the revision read carried along, an audit row naming
// `cli:<user>`). No secret value is ever printed, except one the bridge generates (shown once).
import os from 'node:os';
import path from 'node:path';
import {
  CatalogError,
  desiredFromFile,
  keyringFromEnv,
  SecretKeyError,
  SourceCatalog,
  SourceInputError,
  SourcesConfigError,
  type AuditEntry,
  type FieldChange,
  type PlannedChange,
  type SecretKeyring,
  type SourceView,
} from '#domain/sources/index.ts';
import { rotateSchema, secretValueProblem, parseInput } from '#domain/sources/source-spec.ts';
import {
  CommandFailed,
  flag,
  intOption,
  parseIsoTime,
  requiredOption,
  stringOption,
  TIME_HELP,
  UsageError,
  type ParsedArgs,
} from '../args.ts';
import type { CommandSpec } from '../command.ts';
import type { CliContext, Env } from '../context.ts';
import { renderTable } from '../output.ts';

/** The audit log's actor: `cli:` and the OS user, or BRIDGE_ACTOR (e.g. a deploy job's name). */
export function cliActor(env: Env): string {
  const named = env.BRIDGE_ACTOR?.trim();
  if (named) return `cli:${named}`;
  let user: string | undefined;
  try {
    user = os.userInfo().username;
  } catch {
    // A container user with no passwd entry.
    user = env.USER ?? env.LOGNAME;
  }
  return `cli:${user || `uid-${process.getuid?.() ?? 'unknown'}`}`;
}

function keyring(ctx: CliContext): SecretKeyring | undefined {
  try {
    return keyringFromEnv(ctx.env);
  } catch (error) {
    if (error instanceof SecretKeyError) throw new CommandFailed(error.message);
    throw error;
  }
}

function catalogOf(ctx: CliContext): SourceCatalog {
  return new SourceCatalog(ctx.pool(), keyring(ctx));
}

/** The catalog's refusals as failures (exit 1) that say why, with their HTTP status for scripts. */
function refusal(error: unknown): unknown {
  if (error instanceof CatalogError)
    return new CommandFailed(`refused (${error.status} ${error.code}): ${error.message}`, { status: error.status, code: error.code });
  if (error instanceof SourceInputError)
    return new CommandFailed(
      `refused (${error.status}):\n  ${error.problems.map((p) => `${p.path || '(root)'}: ${p.message}`).join('\n  ')}`,
      { status: error.status, problems: error.problems },
    );
  if (error instanceof SourcesConfigError) return new CommandFailed(error.message, { problems: error.problems });
  if (error instanceof SecretKeyError) return new CommandFailed(error.message);
  return error;
}

function withRefusals(spec: CommandSpec): CommandSpec {
  return {
    ...spec,
    async run(args, ctx) {
      try {
        return await spec.run(args, ctx);
      } catch (error) {
        throw refusal(error);
      }
    },
  };
}

function oneId(args: ParsedArgs, what: string): string {
  if (args.positionals.length !== 1) throw new UsageError(`${what} expects one source id`);
  return args.positionals[0]!;
}

const MAX_VALUE_CHARS = 120;

/** A field's value on one line; a long one (an inline strict schema) cut, with its length. */
function valueText(value: unknown): string {
  const text = JSON.stringify(value) ?? 'null';
  return text.length > MAX_VALUE_CHARS ? `${text.slice(0, MAX_VALUE_CHARS)}… (${text.length} chars)` : text;
}

/** `+ field: to`, `- field: from`, `~ field: from -> to`: secrets appear by id, key id and retire time only. */
export function changeLines(changes: readonly FieldChange[], indent = '  '): string[] {
  return changes.map((c) => {
    const hasFrom = Object.hasOwn(c, 'from');
    const hasTo = Object.hasOwn(c, 'to');
    if (hasFrom && hasTo) return `${indent}~ ${c.field}: ${valueText(c.from)} -> ${valueText(c.to)}`;
    if (hasTo) return `${indent}+ ${c.field}: ${valueText(c.to)}`;
    return `${indent}- ${c.field}${hasFrom ? `: ${valueText(c.from)}` : ''}`;
  });
}

function isChangeList(diff: unknown): diff is FieldChange[] {
  return Array.isArray(diff) && diff.every((c) => typeof c === 'object' && c !== null && typeof (c as FieldChange).field === 'string');
}

/** Per source: what would be (or was) created, updated, deleted or left alone. */
export function planText(planned: readonly PlannedChange[]): { text: string; changed: number } {
  const lines: string[] = [];
  const counts = { create: 0, update: 0, delete: 0, unchanged: 0 };
  for (const c of planned) {
    counts[c.action] += 1;
    lines.push(`${c.action} ${c.sourceId}`);
    // A deleted source's fields are all it had: the line names it, the audit row keeps them.
    if (c.action === 'create' || c.action === 'update') lines.push(...changeLines(c.changes));
  }
  const changed = counts.create + counts.update + counts.delete;
  lines.push(
    changed === 0
      ? `no change (${counts.unchanged} source(s) unchanged)`
      : `${counts.create} to create, ${counts.update} to update, ${counts.delete} to delete, ${counts.unchanged} unchanged`,
  );
  return { text: lines.join('\n'), changed };
}

export const sourcesList: CommandSpec = withRefusals({
  path: ['sources', 'list'],
  summary: 'list the sources kept in Postgres, with their secrets (ids, states, retire times, last verification)',
  usage: '',
  details: [
    'One row per secret. A secret is active, retiring (verifies until its retire time) or retired (refused).',
    'LAST VERIFIED is when an ingress last verified a request with it (written every few seconds): after a',
    'rotation it shows that the provider has switched. Secret values are never shown. Needs DATABASE_URL.',
  ].join('\n'),
  examples: ['bridge sources list', 'bridge sources list --json'],
  options: {},
  mutating: false,
  async run(_args, ctx) {
    const catalog = catalogOf(ctx);
    const [sources, configVersion] = await Promise.all([catalog.list(), catalog.configVersion()]);
    const rows = sources.flatMap((s) => {
      const head = [s.id, s.enabled ? 'yes' : 'no', s.revision, s.spec.scheme, s.spec.tenants.join(','), s.spec.resourceTypes.join(',')];
      const blank = head.map(() => '');
      const secrets = s.secrets.length > 0 ? s.secrets : [undefined];
      return secrets.map((secret, i) => [
        ...(i === 0 ? head : blank),
        secret?.id,
        secret?.state,
        secret?.retireAfter,
        secret?.lastVerifiedAt,
      ]);
    });
    ctx.out.result(
      { config_version: configVersion, sources },
      sources.length === 0
        ? `no sources in the database (configuration version ${configVersion})`
        : [
            renderTable(
              ['source', 'enabled', 'rev', 'scheme', 'tenants', 'types', 'secret', 'state', 'retire after', 'last verified'],
              rows,
            ),
            '',
            `${sources.length} source(s), configuration version ${configVersion}`,
          ].join('\n'),
    );
  },
});

function showText(s: SourceView): string {
  return [
    `source ${s.id}: ${s.enabled ? 'enabled' : 'DISABLED'}, revision ${s.revision} (created ${s.createdAt}, updated ${s.updatedAt})`,
    'spec:',
    ...JSON.stringify(s.spec, null, 2)
      .split('\n')
      .map((l) => `  ${l}`),
    'secrets:',
    ...renderTable(
      ['id', 'key', 'state', 'created', 'retire after', 'last verified'],
      s.secrets.map((x) => [x.id, x.keyId, x.state, x.createdAt, x.retireAfter, x.lastVerifiedAt]),
    )
      .split('\n')
      .map((l) => `  ${l}`),
  ].join('\n');
}

export const sourcesShow: CommandSpec = withRefusals({
  path: ['sources', 'show'],
  summary: 'show one source: its spec, revision, enabled flag and secrets (never their values)',
  usage: '<ID>',
  details: 'The revision is what rotate, disable and enable carry (--if-revision): a write made meanwhile makes them fail (412).',
  examples: ['bridge sources show demo', 'bridge sources show demo --json'],
  options: {},
  positionals: true,
  mutating: false,
  async run(args, ctx) {
    const source = await catalogOf(ctx).get(oneId(args, 'sources show'));
    ctx.out.result(source, showText(source));
  },
});

export const sourcesApply: CommandSpec = withRefusals({
  path: ['sources', 'apply'],
  summary: 'make the database hold the sources of a sources file: prints the diff, then applies it (idempotent)',
  usage: '-f FILE [--prune] [--dry-run]',
  details: [
    'Reads FILE as the ingress reads WEBHOOK_SOURCES_FILE: the same schema and messages, each secret read from',
    'its environment variable or file, strict schemas inlined. Then prints, per source, create / update /',
    'delete / unchanged with the fields that change (secrets by id, never a value), and applies all of it in one',
    'transaction (audited as cli:<user>, or cli:$BRIDGE_ACTOR). A source in the file gets exactly the',
    "file's secrets: one the file lacks is deleted. enabled is left as operators set it (a new source starts",
    'enabled). --prune also deletes the sources the file does not name. Running it again prints "no change".',
    'Exit 0 when applied or nothing to do, 1 when refused (nothing changes). Needs DATABASE_URL and',
    'BRIDGE_SECRET_KEYS.',
  ].join('\n'),
  examples: [
    'bridge sources apply -f sources.json --dry-run',
    'bridge sources apply -f sources.json',
    'BRIDGE_ACTOR=deploy-job bridge sources apply -f sources.json --prune --json',
  ],
  options: {
    file: { type: 'string', short: 'f', valueName: 'FILE', description: 'the sources file (the format of WEBHOOK_SOURCES_FILE)' },
    prune: { type: 'boolean', description: 'also delete the sources the file does not name' },
  },
  mutating: true,
  async run(args, ctx) {
    const file = path.resolve(requiredOption(args, 'file'));
    const prune = flag(args, 'prune');
    const dryRun = flag(args, 'dry-run');
    const desired = desiredFromFile(file, ctx.env);
    const catalog = catalogOf(ctx);
    const planned = await catalog.plan(desired, { prune });
    const plan = planText(planned);
    // The diff first: an operator reads what is about to change before it does.
    ctx.out.text(plan.text);
    if (dryRun || plan.changed === 0) {
      ctx.out.result(
        { dry_run: dryRun, file, prune, changed: plan.changed, changes: planned, config_version: await catalog.configVersion() },
        dryRun ? '(dry run: nothing changed)' : '',
      );
      return;
    }
    const { changes, configVersion } = await catalog.apply(cliActor(ctx.env), desired, { prune });
    if (JSON.stringify(changes) !== JSON.stringify(planned))
      ctx.out.text(`another write came between that plan and the apply; what was applied:\n${planText(changes).text}`);
    ctx.out.result(
      { dry_run: false, file, prune, changed: planText(changes).changed, changes, config_version: configVersion },
      `applied (configuration version ${configVersion}): every ingress and worker picks it up within seconds`,
    );
  },
});

const ifRevisionOption = {
  'if-revision': {
    type: 'string',
    valueName: 'N',
    description: 'refuse (412) unless the source is at this revision (default: the revision read just before)',
  },
} as const;

function revisionToUse(args: ParsedArgs, current: SourceView): number {
  return intOption(args, 'if-revision', 1) ?? current.revision;
}

function staleCheck(id: string, current: SourceView, ifRevision: number): void {
  if (current.revision !== ifRevision)
    throw new CatalogError(
      412,
      'stale_revision',
      `source "${id}" is at revision ${current.revision}, not ${ifRevision}: read it again and retry`,
    );
}

export const sourcesRotate: CommandSpec = withRefusals({
  path: ['sources', 'rotate'],
  summary: 'add a new signing secret to a source; its other secrets verify until --retire-others-after, then are refused',
  usage: '<ID> (--value-env VAR | --generate) --retire-others-after TIME [--secret-id S] [--if-revision N]',
  details: [
    'The new secret verifies at once on every ingress; the ones already there keep verifying until the given',
    'time (one already retiring sooner keeps its time): the overlap in which the provider switches. The value',
    'comes from the environment variable --value-env names (never from the command line, which shells keep in',
    'their history), or --generate makes one (32 random bytes in the encoding of the scheme) and prints it',
    'once: give it to the provider then, it is never shown again. The secret id defaults to the source id and',
    'the time (e.g. demo-20270101T120000Z). Watch LAST VERIFIED in `bridge sources list` to see the switch.',
  ].join('\n'),
  examples: [
    'bridge sources rotate demo --generate --retire-others-after 2027-01-31T00:00:00Z',
    'NEW_SECRET=... bridge sources rotate demo --value-env NEW_SECRET --secret-id demo-2027-01 --retire-others-after 2027-01-31T00:00:00Z',
  ],
  options: {
    'value-env': { type: 'string', valueName: 'VAR', description: 'the environment variable holding the new secret' },
    generate: { type: 'boolean', description: 'generate the new secret and print it once' },
    'retire-others-after': { type: 'string', valueName: 'TIME', description: `when the other secrets stop verifying: ${TIME_HELP}` },
    'secret-id': { type: 'string', valueName: 'S', description: 'the new secret id (default: the source id and the time)' },
    ...ifRevisionOption,
  },
  positionals: true,
  mutating: true,
  async run(args, ctx) {
    const id = oneId(args, 'sources rotate');
    const valueEnv = stringOption(args, 'value-env');
    const generate = flag(args, 'generate');
    if ((valueEnv === undefined) === !generate) throw new UsageError('give exactly one of --value-env VAR and --generate');
    const retireText = requiredOption(args, 'retire-others-after');
    const retireMs = parseIsoTime(retireText, 'retire-others-after');
    if (retireMs === undefined) throw new UsageError(`--retire-others-after must be ${TIME_HELP}, got "${retireText}"`);
    const retireOthersAfter = new Date(retireMs).toISOString();
    const secretId = stringOption(args, 'secret-id');
    let value: string | undefined;
    if (valueEnv !== undefined) {
      value = ctx.env[valueEnv];
      if (value === undefined || value === '') throw new CommandFailed(`environment variable ${valueEnv} (--value-env) is not set`);
    }
    const input = {
      ...(secretId === undefined ? {} : { secretId }),
      ...(value === undefined ? { generate: true as const } : { value }),
      retireOthersAfter,
    };
    const catalog = catalogOf(ctx);
    const current = await catalog.get(id);
    const ifRevision = revisionToUse(args, current);
    if (flag(args, 'dry-run')) {
      parseInput(rotateSchema, input);
      staleCheck(id, current, ifRevision);
      if (secretId !== undefined && current.secrets.some((s) => s.id === secretId))
        throw new SourceInputError(422, [{ path: 'secretId', message: `source "${id}" already has a secret "${secretId}"` }]);
      const problem = value === undefined ? undefined : secretValueProblem(current.spec.scheme, value);
      if (problem) throw new SourceInputError(422, [{ path: 'value', message: `the new secret ${problem}` }]);
      const retiring = current.secrets.filter((s) => s.retireAfter === null || Date.parse(s.retireAfter) > retireMs).map((s) => s.id);
      ctx.out.result(
        {
          dry_run: true,
          source: id,
          revision: current.revision,
          secret_id: secretId ?? null,
          retire_others_after: retireOthersAfter,
          retiring,
        },
        [
          `would add secret ${secretId ?? '(default id)'} to source ${id}${generate ? ' (generated)' : ` (from ${valueEnv})`}`,
          retiring.length > 0 ? `  ${retiring.join(', ')} would verify until ${retireOthersAfter}` : '  no other secret to retire',
          '(dry run: nothing changed)',
        ].join('\n'),
      );
      return;
    }
    const rotated = await catalog.rotate(cliActor(ctx.env), id, ifRevision, input);
    const others = rotated.source.secrets.filter((s) => s.id !== rotated.secretId);
    const lines = [
      `source ${id}: secret ${rotated.secretId} verifies now (revision ${rotated.source.revision})`,
      ...others.map((s) => `  ${s.id}: ${s.retireAfter === null ? 'active' : `${s.state} until ${s.retireAfter}`}`),
    ];
    if (rotated.generated !== undefined)
      lines.push('the new secret, shown this once (give it to the provider now; it is never shown again):', rotated.generated);
    ctx.out.result(
      {
        dry_run: false,
        source: id,
        revision: rotated.source.revision,
        secret_id: rotated.secretId,
        secrets: rotated.source.secrets,
        ...(rotated.generated === undefined ? {} : { generated_value: rotated.generated }),
      },
      lines.join('\n'),
    );
  },
});

function toggle(enabled: boolean): CommandSpec {
  const verb = enabled ? 'enable' : 'disable';
  return withRefusals({
    path: ['sources', verb],
    summary: enabled
      ? 'enable a disabled source: its signed webhooks are accepted again on every ingress within seconds'
      : 'disable a source: every ingress answers it like an unknown source (401) within seconds',
    usage: '<ID> [--if-revision N]',
    details: enabled
      ? 'Idempotent: an enabled source is left alone.'
      : [
          'For a leaked secret or a provider gone rogue. The answer is the one an unknown source gets, so nobody',
          'learns the source exists; its events already on the topic still apply. Idempotent: a disabled source is left alone.',
        ].join('\n'),
    examples: [`bridge sources ${verb} demo`, `bridge sources ${verb} demo --if-revision 3 --json`],
    options: { ...ifRevisionOption },
    positionals: true,
    mutating: true,
    async run(args, ctx) {
      const id = oneId(args, `sources ${verb}`);
      const catalog = catalogOf(ctx);
      const current = await catalog.get(id);
      const ifRevision = revisionToUse(args, current);
      if (flag(args, 'dry-run')) {
        staleCheck(id, current, ifRevision);
        const changes = current.enabled !== enabled;
        ctx.out.result(
          { dry_run: true, source: id, enabled: current.enabled, changed: changes, revision: current.revision },
          `${changes ? `would ${verb} source ${id}` : `source ${id} is already ${verb}d`}\n(dry run: nothing changed)`,
        );
        return;
      }
      const after = await catalog.setEnabled(cliActor(ctx.env), id, ifRevision, enabled);
      const changed = after.revision !== current.revision;
      ctx.out.result(
        { dry_run: false, source: id, enabled: after.enabled, changed, revision: after.revision },
        changed ? `source ${id} ${verb}d (revision ${after.revision})` : `source ${id} is already ${verb}d; nothing changed`,
      );
    },
  });
}

export const sourcesDisable = toggle(false);
export const sourcesEnable = toggle(true);

function historyText(entries: readonly AuditEntry[]): string {
  if (entries.length === 0) return 'no changes recorded';
  return entries
    .map((e) =>
      [
        `#${e.id}  ${e.at}  ${e.actor}  ${e.action}${e.sourceId === null ? '' : ` ${e.sourceId}`}  (configuration version ${e.configVersion})`,
        ...(isChangeList(e.diff) ? changeLines(e.diff) : [`  ${valueText(e.diff)}`]),
      ].join('\n'),
    )
    .join('\n');
}

export const sourcesHistory: CommandSpec = withRefusals({
  path: ['sources', 'history'],
  summary: 'the audit log of source changes, newest first: who, what (a diff without secret values), when',
  usage: '[ID] [--limit N]',
  details: 'Every write through the operator API, the console or this CLI, with its actor (a token name, console:<name>, cli:<user>).',
  examples: ['bridge sources history', 'bridge sources history demo --limit 5 --json'],
  options: { limit: { type: 'string', valueName: 'N', description: 'how many entries, at most 500 (default 20)' } },
  positionals: true,
  mutating: false,
  async run(args, ctx) {
    if (args.positionals.length > 1) throw new UsageError('sources history expects at most one source id');
    const sourceId = args.positionals[0];
    const limit = intOption(args, 'limit', 1) ?? 20;
    const entries = await catalogOf(ctx).history({ ...(sourceId === undefined ? {} : { sourceId }), limit });
    ctx.out.result({ entries }, historyText(entries));
  },
});

export const sourcesRekey: CommandSpec = withRefusals({
  path: ['sources', 'rekey'],
  summary: 'seal every stored secret again under the active key of BRIDGE_SECRET_KEYS (after adding a new key)',
  usage: '',
  details: [
    'Rotating the key that seals the secrets: add the new key to BRIDGE_SECRET_KEYS of every ingress, worker and',
    'console (id:base64 of 32 bytes, comma-separated), make it BRIDGE_SECRET_KEY_ID, run this, then drop the',
    'old key. The secret values do not change; each re-sealed secret gets an audit row.',
  ].join('\n'),
  examples: ['bridge sources rekey --dry-run', 'bridge sources rekey'],
  options: {},
  mutating: true,
  async run(args, ctx) {
    const keys = keyring(ctx);
    if (keys === undefined) throw new CommandFailed('BRIDGE_SECRET_KEYS is not set: there is no key to seal with');
    const catalog = new SourceCatalog(ctx.pool(), keys);
    if (flag(args, 'dry-run')) {
      const stale = (await catalog.list()).flatMap((s) =>
        s.secrets.filter((x) => x.keyId !== keys.activeKeyId).map((x) => ({ source: s.id, secret: x.id, key_id: x.keyId })),
      );
      ctx.out.result(
        { dry_run: true, active_key_id: keys.activeKeyId, secrets: stale.length, stale },
        `${stale.length} secret(s) would be sealed again under key ${keys.activeKeyId}\n(dry run: nothing changed)`,
      );
      return;
    }
    const count = await catalog.rekey(cliActor(ctx.env));
    ctx.out.result(
      { dry_run: false, active_key_id: keys.activeKeyId, secrets: count },
      `${count} secret(s) sealed again under key ${keys.activeKeyId}`,
    );
  },
});

export const sourcesCommands: CommandSpec[] = [
  sourcesList,
  sourcesShow,
  sourcesApply,
  sourcesRotate,
  sourcesDisable,
  sourcesEnable,
  sourcesHistory,
  sourcesRekey,
];
