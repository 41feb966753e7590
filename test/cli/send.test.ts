import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { sampleThemeEvent } from '#domain/contract/index.ts';
import { SIGNATURE_HEADERS, verifySignature, type SignatureScheme } from '#domain/signing/index.ts';
import { loadSources } from '#domain/sources/index.ts';
import { runBridge } from '../kit/run-bridge.ts';

interface Received {
  url: string;
  headers: IncomingMessage['headers'];
  body: Buffer;
  verified: boolean;
}

/**
 * A stand-in ingress that verifies with the shared verifySignature and the same sources file,
 * so the test proves `send` signs exactly as a provider must. (The real ingress is tested by its own suite.)
 */
describe('bridge send (as a subprocess)', () => {
  let server: Server;
  let url: string;
  let dir: string;
  let env: Record<string, string>;
  const received: Received[] = [];
  let answer = 202;

  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'bridge-send-'));
    writeFileSync(
      path.join(dir, 'sources.json'),
      JSON.stringify({
        sources: [
          { id: 'prov', scheme: 'hmac-sha256', secrets: [{ id: 'k2', env: 'SEND_TEST_SECRET' }], tenants: ['tenant_acme'] },
          { id: 'std', scheme: 'standard-webhooks', secrets: [{ id: 's1', env: 'SEND_TEST_STD' }], tenants: ['tenant_acme'] },
        ],
      }),
    );
    env = {
      WEBHOOK_SOURCES_FILE: path.join(dir, 'sources.json'),
      SEND_TEST_SECRET: 'a-test-secret-of-32-bytes-length',
      SEND_TEST_STD: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
    };
    const sources = loadSources(env.WEBHOOK_SOURCES_FILE!, env);
    server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const body = Buffer.concat(chunks);
        const source = sources.find((s) => req.url === `/webhooks/${s.id}`)!;
        const names = SIGNATURE_HEADERS[source.scheme as SignatureScheme];
        const result = verifySignature({
          scheme: source.scheme,
          secrets: source.secrets,
          headers: {
            id: req.headers[names.id] as string,
            timestamp: names.timestamp === undefined ? undefined : (req.headers[names.timestamp] as string),
            signature: req.headers[names.signature] as string,
          },
          rawBody: body,
          now: Math.floor(Date.now() / 1000),
          toleranceSeconds: 300,
        });
        received.push({ url: req.url!, headers: req.headers, body, verified: result.ok });
        res.writeHead(result.ok ? answer : 401, { 'content-type': 'application/json' });
        res.end(JSON.stringify(result.ok ? { status: 'accepted', event_id: req.headers[names.id] } : { error: 'unauthorized' }));
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  });
  afterAll(async () => {
    await new Promise((resolve) => server.close(resolve));
    rmSync(dir, { recursive: true, force: true });
  });

  it('signs the file byte for byte with the source scheme; prints status and response', async () => {
    const event = sampleThemeEvent();
    // Odd spacing on purpose: what is signed and sent must be the file's bytes, not a re-serialisation.
    const file = path.join(dir, 'event.json');
    writeFileSync(file, `{ "event_id" : ${JSON.stringify(event.event_id)},\n  "rest": ${JSON.stringify(event)} }\n`);
    const run = await runBridge(['send', '--source', 'prov', '--file', file, '--url', url], env);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toMatch(/202 Accepted/);
    expect(run.stdout).toContain(`"event_id":"${event.event_id}"`);
    const got = received.at(-1)!;
    expect(got).toMatchObject({ url: '/webhooks/prov', verified: true });
    expect(got.body.equals(readFileSync(file))).toBe(true);
    expect(got.headers['x-webhook-id']).toBe(event.event_id);
    expect(got.headers['content-type']).toBe('application/json');
  });

  it('--demo posts a sample theme event, here with Standard Webhooks; --json output', async () => {
    const run = await runBridge(['send', '--demo', '--source', 'std', '--url', url, '--json'], env);
    expect(run.code, run.stderr).toBe(0);
    const out = run.json();
    expect(out).toMatchObject({ ok: true, status: 202, source: 'std', response: { status: 'accepted' } });
    const got = received.at(-1)!;
    expect(got.verified).toBe(true);
    expect(got.headers['webhook-id']).toBe(out.event_id);
    expect(JSON.parse(got.body.toString())).toMatchObject({
      event_id: out.event_id,
      event_type: 'theme.updated',
      tenant_id: 'tenant_acme',
    });
  });

  it("--timestamp-format iso and --signature-format bare send seed 004's forms, verified as sent", async () => {
    const run = await runBridge(
      ['send', '--demo', '--source', 'prov', '--url', url, '--timestamp-format', 'iso', '--signature-format', 'bare'],
      env,
    );
    expect(run.code, run.stderr).toBe(0);
    const got = received.at(-1)!;
    expect(got.verified).toBe(true);
    expect(got.headers['x-webhook-timestamp']).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    expect(got.headers['x-webhook-signature']).toMatch(/^[0-9a-f]{64}$/);

    const refused = await runBridge(['send', '--demo', '--source', 'std', '--url', url, '--timestamp-format', 'iso'], env);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/are for hmac-sha256 sources; "std" uses standard-webhooks/);
    const bad = await runBridge(['send', '--demo', '--source', 'prov', '--url', url, '--signature-format', 'v2'], env);
    expect(bad.stderr).toMatch(/--signature-format must be v1 or bare/);
  });

  it('a non-2xx answer exits 1; --dry-run sends nothing; an unknown source fails', async () => {
    answer = 503;
    const failed = await runBridge(['send', '--demo', '--source', 'prov', '--url', url], env);
    answer = 202;
    expect(failed.code).toBe(1);
    expect(failed.stdout).toMatch(/503/);

    const count = received.length;
    const dry = await runBridge(['send', '--demo', '--source', 'prov', '--url', url, '--dry-run'], env);
    expect(dry.code, dry.stderr).toBe(0);
    expect(dry.stdout).toMatch(/dry run: nothing sent/);
    expect(dry.stdout).toMatch(/x-webhook-signature: v1=[0-9a-f]{7}…\(67 chars\)/);
    expect(received.length).toBe(count);

    const unknown = await runBridge(['send', '--demo', '--source', 'nope', '--url', url], env);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(/unknown source "nope"; known: prov, std/);
  });
});
