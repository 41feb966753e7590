import { appliedMigrationVersions, listMigrations, migrate } from '#domain/store/migrate.ts';
import { flag } from '../args.ts';
import type { CommandSpec } from '../command.ts';

export const migrateCommand: CommandSpec = {
  path: ['migrate'],
  summary: 'apply pending database migrations (forward-only, serialised by an advisory lock)',
  usage: '[--dry-run]',
  details: 'The same migrate() the services run at start-up, against DATABASE_URL.',
  examples: ['bridge migrate --dry-run', 'bridge migrate'],
  options: {},
  mutating: true,
  async run(args, ctx) {
    const pool = ctx.pool();
    if (flag(args, 'dry-run')) {
      // Read-only on purpose: migrate({dryRun}) would still create schema_migrations on a fresh database.
      const all = await listMigrations();
      const done = new Set(await appliedMigrationVersions(pool));
      const pending = all.filter((m) => !done.has(m.version)).map((m) => ({ version: m.version, name: m.name }));
      ctx.out.result(
        { dry_run: true, pending, already_applied: done.size },
        pending.length
          ? `pending (${pending.length}):\n${pending.map((m) => `  ${String(m.version).padStart(4, '0')} ${m.name}`).join('\n')}\n(dry run: nothing applied)`
          : `up to date (${done.size} applied)`,
      );
      return;
    }
    const result = await migrate(pool);
    const applied = result.applied.map((m) => ({ version: m.version, name: m.name }));
    ctx.out.result(
      { applied, already_applied: result.alreadyApplied },
      applied.length
        ? `applied (${applied.length}):\n${applied.map((m) => `  ${String(m.version).padStart(4, '0')} ${m.name}`).join('\n')}`
        : `up to date (${result.alreadyApplied} applied)`,
    );
  },
};
