import { afterEach, describe, expect, inject, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { canConnect, useDatabaseUrl, withDatabase } from '../../infra/provision/postgres.ts';
import { freePort } from '../kit/ports.ts';

// A DATABASE_URL whose server answers but whose database is not there yet: the start commands
// said Postgres did not answer. Now they say what is missing, and create it on their own server.
describe('DATABASE_URL naming a database that does not exist yet', () => {
  const adminUrl = inject('pgAdminUrl');
  const created: string[] = [];
  const missing = () => {
    const name = `bridge_missing_${randomBytes(5).toString('hex')}`;
    created.push(name);
    return name;
  };

  afterEach(async () => {
    const admin = new pg.Client({ connectionString: adminUrl });
    await admin.connect();
    try {
      for (const name of created.splice(0)) await admin.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(name)} WITH (FORCE)`);
    } finally {
      await admin.end();
    }
  });

  it('is created on a server the dev tooling owns, and the URL then answers', async () => {
    const url = withDatabase(adminUrl, missing());
    const lines: string[] = [];
    expect(
      await useDatabaseUrl(
        url,
        (l) => lines.push(l),
        () => true,
      ),
    ).toBe(url);
    expect(await canConnect(url)).toBe(true);
    expect(lines.join('\n')).toMatch(/creating database bridge_missing_/);
    // A second start finds it there.
    expect(
      await useDatabaseUrl(
        url,
        () => {},
        () => true,
      ),
    ).toBe(url);
  });

  it('elsewhere fails saying which database is missing on which server, and creates nothing', async () => {
    const name = missing();
    const url = withDatabase(adminUrl, name);
    const { hostname, port } = new URL(adminUrl);
    await expect(
      useDatabaseUrl(
        url,
        () => {},
        () => false,
      ),
    ).rejects.toThrow(`database "${name}" does not exist on ${hostname}:${port || 5432}; create it`);
    expect(await canConnect(url)).toBe(false);
  });

  it('a server that does not answer is still told apart', async () => {
    const url = `postgres://postgres@127.0.0.1:${await freePort()}/bridge`;
    await expect(
      useDatabaseUrl(
        url,
        () => {},
        () => true,
      ),
    ).rejects.toThrow(/DATABASE_URL is set but no session opens there \(127\.0\.0\.1:\d+\): .*ECONNREFUSED/);
  });
});
