// `bridge tokens ...`: the named operator tokens of the operator API (/api/v1 on the console). A
// token is 32 random bytes, printed once when created; only its SHA-256 is stored.
import { listTokenRows } from '#domain/store/sources.ts';
import { createOperatorToken, revokeOperatorToken } from '#domain/sources/index.ts';
import { CommandFailed, flag, requiredOption, UsageError, type ParsedArgs } from '../args.ts';
import type { CommandSpec } from '../command.ts';
import { renderTable } from '../output.ts';
import { cliActor } from './sources.ts';

const TOKEN_NAME = /^[A-Za-z0-9_.-]{1,64}$/;
const SCOPES = ['read', 'write'] as const;
type Scope = (typeof SCOPES)[number];

function tokenName(args: ParsedArgs, what: string): string {
  if (args.positionals.length !== 1) throw new UsageError(`${what} expects one token NAME`);
  const name = args.positionals[0]!;
  if (!TOKEN_NAME.test(name)) throw new UsageError(`the token name must match ${TOKEN_NAME.source}, got "${name}"`);
  return name;
}

export const tokensCreate: CommandSpec = {
  path: ['tokens', 'create'],
  summary: 'create a named operator token for the operator API and print it once',
  usage: '<NAME> --scope read|write',
  details: [
    'The token is 32 random bytes (base64url), printed this once: store it where the caller keeps secrets.',
    'Only its SHA-256 is kept. read may only read; write may also change sources. The name is the actor in',
    'the audit log of every change made with it, and cannot be used again, even after a revoke. Needs DATABASE_URL.',
  ].join('\n'),
  examples: ['bridge tokens create deploy-pipeline --scope write', 'bridge tokens create dashboard --scope read --json'],
  options: { scope: { type: 'string', valueName: 'SCOPE', description: 'read or write' } },
  positionals: true,
  mutating: true,
  async run(args, ctx) {
    const name = tokenName(args, 'tokens create');
    const scope = requiredOption(args, 'scope');
    if (!(SCOPES as readonly string[]).includes(scope)) throw new UsageError(`--scope must be read or write, got "${scope}"`);
    const pool = ctx.pool();
    if (flag(args, 'dry-run')) {
      const taken = (await listTokenRows(pool)).some((t) => t.name === name);
      if (taken) throw new CommandFailed(`a token named "${name}" exists (names are not reused, even revoked): pick another`);
      ctx.out.result({ dry_run: true, name, scope }, `would create token ${name} (${scope})\n(dry run: nothing changed)`);
      return;
    }
    const token = await createOperatorToken(pool, cliActor(ctx.env), name, scope as Scope);
    if (token === undefined) throw new CommandFailed(`a token named "${name}" exists (names are not reused, even revoked): pick another`);
    ctx.out.result(
      { dry_run: false, name, scope, token },
      [`token ${name} (${scope}) created; it is shown this once, only its SHA-256 is kept:`, token].join('\n'),
    );
  },
};

export const tokensList: CommandSpec = {
  path: ['tokens', 'list'],
  summary: 'list the operator tokens: name, scope, created, last used, revoked (never the token)',
  usage: '',
  examples: ['bridge tokens list', 'bridge tokens list --json'],
  options: {},
  mutating: false,
  async run(_args, ctx) {
    const tokens = (await listTokenRows(ctx.pool())).map((t) => ({
      name: t.name,
      scope: t.scope,
      created_at: t.createdAt.toISOString(),
      last_used_at: t.lastUsedAt?.toISOString() ?? null,
      revoked_at: t.revokedAt?.toISOString() ?? null,
    }));
    ctx.out.result(
      { tokens },
      tokens.length === 0
        ? 'no operator tokens'
        : renderTable(
            ['name', 'scope', 'created', 'last used', 'revoked'],
            tokens.map((t) => [t.name, t.scope, t.created_at, t.last_used_at, t.revoked_at]),
          ),
    );
  },
};

export const tokensRevoke: CommandSpec = {
  path: ['tokens', 'revoke'],
  summary: 'revoke an operator token: the API refuses it from the next request on',
  usage: '<NAME>',
  details: 'The row stays (with its revoke time) so the audit log still names who did what; exit 1 when no live token has that name.',
  examples: ['bridge tokens revoke deploy-pipeline'],
  options: {},
  positionals: true,
  mutating: true,
  async run(args, ctx) {
    const name = tokenName(args, 'tokens revoke');
    const pool = ctx.pool();
    if (flag(args, 'dry-run')) {
      const live = (await listTokenRows(pool)).some((t) => t.name === name && t.revokedAt === null);
      if (!live) throw new CommandFailed(`no live token named "${name}"`);
      ctx.out.result({ dry_run: true, name }, `would revoke token ${name}\n(dry run: nothing changed)`);
      return;
    }
    if (!(await revokeOperatorToken(pool, cliActor(ctx.env), name))) throw new CommandFailed(`no live token named "${name}"`);
    ctx.out.result({ dry_run: false, name, revoked: true }, `token ${name} revoked`);
  },
};

export const tokensCommands: CommandSpec[] = [tokensCreate, tokensList, tokensRevoke];
