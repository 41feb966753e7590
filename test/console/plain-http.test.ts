import { describe, expect, it } from 'vitest';
import { freePort } from '../kit/ports.ts';
import { testBrokers } from '../kit/kafka.ts';
import { spawnService } from '../kit/service.ts';

// The console as deployed (its bundle, its own process): listening beyond loopback over plain HTTP
// would send the operator token and the session cookie in the clear, so it is refused at start.
const env = async (extra: Record<string, string>) => ({
  KAFKA_BROKERS: testBrokers().join(','),
  DATABASE_URL: process.env.DATABASE_URL ?? 'postgres://127.0.0.1:5432/postgres',
  CONSOLE_PORT: String(await freePort()),
  CONSOLE_OPERATOR_TOKEN: 'plain-http-test-operator-token',
  LOG_LEVEL: 'info',
  ...extra,
});

describe('the console beyond loopback', () => {
  it('refuses to start over plain HTTP: exit 1 and the way out named', async () => {
    const console_ = spawnService('console', await env({ CONSOLE_HOST: '0.0.0.0' }));
    try {
      const outcome = await Promise.race([console_.exited, console_.line('console listening').then(() => 'listening' as const)]);
      expect(outcome, console_.output()).toEqual({ code: 1, signal: null });
      expect(console_.stderr()).toMatch(/CONSOLE_HOST 0\.0\.0\.0 is not loopback.*plain HTTP/);
      expect(console_.stderr()).toMatch(/CONSOLE_HTTPS=true/);
      expect(console_.stdout()).not.toContain('console listening');
    } finally {
      await console_.stop();
    }
  });

  it('starts there when CONSOLE_HTTPS=true says TLS ends in front of it', async () => {
    const console_ = spawnService('console', await env({ CONSOLE_HOST: '0.0.0.0', CONSOLE_HTTPS: 'true' }));
    try {
      const listening = await console_.line('console listening');
      expect(listening.sign_in_to_read).toBe(true);
    } finally {
      await console_.stop();
    }
    expect((await console_.exited).code).toBe(0);
  });
});
