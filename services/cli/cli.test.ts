import { createHmac } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SIGNATURE_HEADERS, verifySignature } from '#domain/signing/index.ts';
import { runCli } from './cli.ts';
import { allCommands } from './commands/index.ts';

async function run(argv: string[], env: Record<string, string> = {}) {
  let stdout = '';
  let stderr = '';
  const code = await runCli(argv, { env, commands: allCommands, io: { stdout: (t) => (stdout += t), stderr: (t) => (stderr += t) } });
  return { code, stdout, stderr };
}

describe('runCli dispatch and usage errors (exit 2)', () => {
  it.each([
    [['frobnicate'], /unknown command "frobnicate"/],
    [[], /Usage: bridge <command>/],
    [['dlq'], /missing or unknown subcommand of "dlq"/],
    [['offsets', 'reset', '--group', 'g', '--topic', 't'], /--to is required/],
    [['offsets', 'reset', '--group', 'g', '--topic', 't', '--to', '2026-13-45'], /--to must be earliest, latest/],
    [['offsets', 'reset', '--group', 'g', '--topic', 't', '--to', '1', '--partition', 'x'], /--partition must be an integer/],
    [['lag', '--group'], /argument missing/],
    [['send', '--file', 'e.json'], /--source is required with --file/],
    [['send', '--demo', '--url', 'not a url'], /--url must be an absolute/],
    [['send', '--demo', '--retry', '0'], /--retry must be an integer >= 1, got "0"/],
    [['send', '--demo', '--retry', 'two'], /--retry must be an integer >= 1/],
    [['send', '--demo', '--retry', '-1'], /--retry/],
    [['send', '--demo', '--retry', '99999999999999999999'], /--retry is too large/],
    [['send', '--demo', '--retry'], /argument missing/],
    [['reprocess', '--topic', 't'], /--from is required/],
    [['reprocess', '--topic', 't', '--from', 'soon'], /--from must be an offset/],
    [['reprocess', '--topic', 't', '--from', '10', '--to', '5'], /--to must not be before --from/],
    [['trace', 'tenant'], /expects <tenant> <resource_type> <resource_id>/],
    [['dlq', 'show'], /expects one <event_id\|partition:offset>/],
    [['dlq', 'replay'], /give event ids \(or partition:offset\) to replay, or --all/],
    [['dlq', 'replay', 'e1', '--all'], /either event ids or --all/],
    [['dlq', 'list', '--since', 'last week'], /--since must be an ISO-8601 time with an explicit offset \(Z or ±HH:MM\)/],
    [['dlq', 'list', '--since', '2026-01-31T12:00'], /--since 2026-01-31T12:00 has no UTC offset: add Z for UTC \(2026-01-31T12:00Z\)/],
    [['reprocess', '--topic', 't', '--from', '2026-01-31'], /--from 2026-01-31 has no UTC offset: add Z for UTC \(2026-01-31T00:00:00Z\)/],
    [['offsets', 'reset', '--group', 'g', '--topic', 't', '--to', '2026-01-31T12:00:00'], /--to 2026-01-31T12:00:00 has no UTC offset/],
  ])('%j', async (argv, message) => {
    const r = await run(argv);
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr).toMatch(message);
    expect(r.stdout).toBe('');
  });

  it('usage errors are JSON on stderr with --json', async () => {
    const r = await run(['lag', '--nope', '--json']);
    expect(r.code).toBe(2);
    expect(JSON.parse(r.stderr).error).toMatch(/Unknown option '--nope'/);
  });

  it('every command has --help (exit 0), examples, and --dry-run when it changes something', async () => {
    for (const command of allCommands) {
      const r = await run([...command.path, '--help']);
      expect(r.code).toBe(0);
      expect(r.stdout).toContain(`bridge ${command.path.join(' ')}`);
      expect(r.stdout).toContain('Examples:');
      expect(r.stdout.includes('--dry-run')).toBe(command.mutating);
    }
    const top = await run(['--help']);
    expect(top.code).toBe(0);
    for (const command of allCommands) expect(top.stdout).toContain(command.path.join(' '));
    expect((await run(['dlq', '--help'])).stdout).toContain('dlq replay');
  });

  it('a missing setting is a failure (exit 1) naming the variable, not a usage error', async () => {
    const r = await run(['lag']);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/KAFKA_BROKERS/);
  });
});

describe('bridge send, in process, against a stand-in ingress', () => {
  const SECRET = 'a-body-only-secret-of-32-bytes!!';
  // Each source its own secret: the sources file refuses two sources sharing one.
  const PROV_SECRET = 'an-hmac-sha256-secret-of-32-byte';
  let dir: string;
  let env: Record<string, string>;
  let server: Server;
  let url: string;
  const received: Array<{ headers: IncomingHttpHeaders; body: Buffer; verified: boolean }> = [];

  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'bridge-send-unit-'));
    writeFileSync(
      path.join(dir, 'sources.json'),
      JSON.stringify({
        sources: [
          { id: 'gh', scheme: 'hmac-sha256-body', secrets: [{ id: 'b1', env: 'SEND_UNIT_SECRET' }], tenants: ['tenant_acme'] },
          { id: 'prov', scheme: 'hmac-sha256', secrets: [{ id: 'k1', env: 'SEND_UNIT_PROV_SECRET' }], tenants: ['tenant_acme'] },
        ],
      }),
    );
    writeFileSync(path.join(dir, 'event.json'), '{"event_id":"evt_unit_1", "tenant_id":"tenant_acme"}');
    env = { WEBHOOK_SOURCES_FILE: path.join(dir, 'sources.json'), SEND_UNIT_SECRET: SECRET, SEND_UNIT_PROV_SECRET: PROV_SECRET };
    server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const body = Buffer.concat(chunks);
        const scheme = req.url === '/webhooks/gh' ? 'hmac-sha256-body' : 'hmac-sha256';
        const names = SIGNATURE_HEADERS[scheme];
        const header = (name: string | undefined) => (name === undefined ? undefined : (req.headers[name] as string | undefined));
        const result = verifySignature({
          scheme,
          secrets: [{ id: 'b1', value: scheme === 'hmac-sha256-body' ? SECRET : PROV_SECRET }],
          headers: { id: header(names.id), timestamp: header(names.timestamp), signature: header(names.signature) },
          rawBody: body,
          now: Math.floor(Date.now() / 1000),
          toleranceSeconds: 300,
        });
        received.push({ headers: req.headers, body, verified: result.ok });
        res.writeHead(result.ok ? 202 : 401, { 'content-type': 'application/json' });
        res.end(JSON.stringify(result.ok ? { status: 'accepted' } : { error: 'unauthorized' }));
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  });
  afterAll(async () => {
    await new Promise<void>((resolve) => server.close(() => resolve()));
    rmSync(dir, { recursive: true, force: true });
  });

  it('hmac-sha256-body: signs the file bytes alone, sends no timestamp header, and verifies', async () => {
    received.length = 0;
    const file = path.join(dir, 'event.json');
    const r = await run(['send', '--source', 'gh', '--file', file, '--url', url, '--json'], env);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ ok: true, status: 202, event_id: 'evt_unit_1' });
    const got = received[0]!;
    expect(got.verified).toBe(true);
    expect(got.body.toString()).toBe('{"event_id":"evt_unit_1", "tenant_id":"tenant_acme"}');
    expect(got.headers['x-webhook-id']).toBe('evt_unit_1');
    expect(got.headers['x-webhook-signature']).toBe(`sha256=${createHmac('sha256', SECRET).update(got.body).digest('hex')}`);
    expect(Object.keys(got.headers).filter((h) => h.includes('timestamp'))).toEqual([]);
    expect(got.headers['x-webhook-retry']).toBeUndefined();
  });

  it.each(['gh', 'prov'])('%s: --retry 3 adds X-Webhook-Retry: 3 and the delivery still verifies', async (source) => {
    received.length = 0;
    const r = await run(['send', '--source', source, '--file', path.join(dir, 'event.json'), '--url', url, '--retry', '3'], env);
    expect(r.code, r.stderr).toBe(0);
    expect(received).toHaveLength(1);
    expect(received[0]!.headers['x-webhook-retry']).toBe('3');
    expect(received[0]!.verified).toBe(true);
  });

  it('--dry-run shows the retry header and a redacted sha256= signature, and sends nothing', async () => {
    received.length = 0;
    const r = await run(
      ['send', '--source', 'gh', '--file', path.join(dir, 'event.json'), '--url', url, '--retry', '02', '--dry-run', '--json'],
      env,
    );
    expect(r.code, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout) as { dry_run: boolean; scheme: string; headers: Record<string, string> };
    expect(out).toMatchObject({ dry_run: true, scheme: 'hmac-sha256-body' });
    expect(out.headers['x-webhook-retry']).toBe('2');
    expect(out.headers['x-webhook-signature']).toMatch(/^sha256=[0-9a-f]{3}…\(71 chars\)$/);
    expect(Object.keys(out.headers).sort()).toEqual(['content-type', 'x-webhook-id', 'x-webhook-retry', 'x-webhook-signature']);
    expect(received).toHaveLength(0);
  });

  it('--help documents --retry', async () => {
    const r = await run(['send', '--help']);
    expect(r.stdout).toContain('--retry <N>');
    expect(r.stdout).toContain('X-Webhook-Retry: N');
  });
});
