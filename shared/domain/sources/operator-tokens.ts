// Named tokens for the operator API: 32 random bytes shown once; only the SHA-256 of the token's
// text is stored (a token this random needs no slow hash). Creating and revoking one is audited
// with the sources' changes: who may change sources is itself a change worth a record.
import { createHash, randomBytes } from 'node:crypto';
import type { Pool } from 'pg';
import { withTransaction } from '#plumbing/db/transaction.ts';
import { insertAuditRow, insertTokenRow, readConfigVersion, revokeTokenRow } from '#domain/store/sources.ts';
import type { Actor } from './catalog.ts';

export type TokenScope = 'read' | 'write';

/** How the API looks a token up: the SHA-256 of its UTF-8 text. */
export function tokenDigest(token: string): Buffer {
  return createHash('sha256').update(token, 'utf8').digest();
}

/** A new token's text: 32 random bytes, base64url. */
export function newOperatorToken(): string {
  return randomBytes(32).toString('base64url');
}

/** Stores a new token under `name` and returns its text (shown once); undefined when the name is taken. */
export async function createOperatorToken(pool: Pool, actor: Actor, name: string, scope: TokenScope): Promise<string | undefined> {
  const token = newOperatorToken();
  return withTransaction(pool, async (client) => {
    if (!(await insertTokenRow(client, { name, sha256: tokenDigest(token), scope }))) return undefined;
    const configVersion = await readConfigVersion(client);
    await insertAuditRow(client, {
      actor,
      action: 'token-create',
      sourceId: null,
      configVersion,
      diff: [{ field: 'token', to: { name, scope } }],
    });
    return token;
  });
}

/** false when no live token has that name. */
export async function revokeOperatorToken(pool: Pool, actor: Actor, name: string): Promise<boolean> {
  return withTransaction(pool, async (client) => {
    if (!(await revokeTokenRow(client, name))) return false;
    const configVersion = await readConfigVersion(client);
    await insertAuditRow(client, {
      actor,
      action: 'token-revoke',
      sourceId: null,
      configVersion,
      diff: [{ field: 'token', from: { name } }],
    });
    return true;
  });
}
