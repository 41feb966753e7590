import { describe, expect, it } from 'vitest';
import { devToolingOwns, missingDatabaseMessage } from './postgres.ts';

describe('devToolingOwns: servers where the start commands may create a database', () => {
  it.each([
    ['postgres://postgres@127.0.0.1:5432/bridge_dev', true],
    ['postgres://postgres@localhost/bridge_dev', true],
    ['postgres://postgres:postgres@127.0.0.1:54329/bridge_dev', true],
    ['postgres://postgres@[::1]:5432/bridge_dev', true],
    ['postgres://postgres@127.0.0.1:6543/bridge_dev', false],
    ['postgres://app@db.example.com:5432/bridge', false],
  ])('%s -> %s', (url, owned) => {
    expect(devToolingOwns(url)).toBe(owned);
  });
});

describe('missingDatabaseMessage', () => {
  it('names the database and the server, says how to create it, and leaves the password out', () => {
    const message = missingDatabaseMessage('postgres://alice:s3cret@db.example.com:6543/bridge_x');
    expect(message).toBe(
      'database "bridge_x" does not exist on db.example.com:6543; create it (createdb -h db.example.com -p 6543 -U alice bridge_x) ' +
        'or point DATABASE_URL at a database that exists',
    );
    expect(message).not.toContain('s3cret');
  });

  it('takes the default port when the URL has none', () => {
    expect(missingDatabaseMessage('postgres://postgres@localhost/app')).toMatch(/^database "app" does not exist on localhost:5432;/);
  });
});
