import { readFile } from 'node:fs/promises';
import { randomUUID } from 'node:crypto';
import { sampleThemeEvent } from '#domain/contract/index.ts';
import { signWebhook, SIGNATURE_HEADERS } from '#domain/signing/index.ts';
import { keyringFromEnv, loadSources, SecretKeyError, SourcesConfigError, webhookSourcesFromDatabase } from '#domain/sources/index.ts';
import { CommandFailed, flag, intOption, stringOption, UsageError } from '../args.ts';
import type { CommandSpec } from '../command.ts';

export const DEFAULT_INGRESS_URL = 'http://127.0.0.1:8080';
const DEMO_SOURCE = 'demo';
/** The provider's delivery attempt number (1 = first delivery); not covered by any signature. */
export const RETRY_HEADER = 'x-webhook-retry';

/** A base URL (no path) gets `/webhooks/<source>`; a URL with a path is used as given. */
export function webhookUrl(base: string, source: string): string {
  let url: URL;
  try {
    url = new URL(base);
  } catch {
    throw new UsageError(`--url must be an absolute http(s) URL, got "${base}"`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new UsageError(`--url must be http or https, got "${base}"`);
  if (url.pathname === '/' || url.pathname === '') url.pathname = `/webhooks/${encodeURIComponent(source)}`;
  return url.toString();
}

/** Shows that a signature was made without printing one that could be replayed from a terminal log. */
function redactSignature(value: string): string {
  return value.length > 14 ? `${value.slice(0, 10)}…(${value.length} chars)` : value;
}

export const sendCommand: CommandSpec = {
  path: ['send'],
  summary: "sign a webhook with the source's scheme and secret and POST it to the ingress",
  usage:
    '(--source S --file event.json | --demo [--source S]) [--url U] [--secret-id ID] [--retry N] [--timestamp-format unix|iso] [--signature-format v1|bare]',
  details: [
    "Signs the file's exact bytes with the shared signing module, using the source's scheme and its first",
    'secret from WEBHOOK_SOURCES_FILE, or from Postgres with SOURCES_FROM=postgres (or --secret-id). The id header is the',
    "body's event_id.",
    `--demo sends a fresh sample theme.updated event (source "${DEMO_SOURCE}" unless --source is given).`,
    `--url is the ingress base URL (default INGRESS_URL or ${DEFAULT_INGRESS_URL}); a URL with a path is used as is.`,
    'Headers follow the scheme: hmac-sha256 and standard-webhooks send an id, a timestamp (now) and a signature;',
    'hmac-sha256-body sends an id and a signature of the body alone, no timestamp.',
    `--retry N (integer >= 1) adds "X-Webhook-Retry: N", the provider's delivery attempt number, to simulate a`,
    'redelivery: send the same --file again with --retry 2 (same event_id, so the same id header). The header is',
    'not signed; the timestamp, if the scheme has one, is still now, as a provider re-signs each attempt.',
    'hmac-sha256 only: --timestamp-format iso sends X-Webhook-Timestamp as an ISO-8601 UTC time (2026-01-01T00:00:00Z)',
    'instead of unix seconds, signed as sent; --signature-format bare sends the bare hex HMAC instead of v1=<hex>',
    "(seed 004's sample provider sends both).",
    'Exit code 0 when the ingress answered 2xx, 1 otherwise.',
  ].join('\n'),
  examples: [
    'bridge send --demo',
    'bridge send --source demo --file event.json --url http://127.0.0.1:8080',
    'bridge send --source demo --file event.json --retry 2',
    'bridge send --demo --timestamp-format iso --signature-format bare',
  ],
  options: {
    source: { type: 'string', description: 'source id from the sources file', valueName: 'S' },
    file: { type: 'string', description: 'JSON event to send, byte for byte', valueName: 'path' },
    demo: { type: 'boolean', description: 'send a sample theme event' },
    url: { type: 'string', description: 'ingress base URL or full webhook URL', valueName: 'U' },
    'secret-id': { type: 'string', description: 'sign with this secret of the source (default: its first)', valueName: 'ID' },
    'timeout-ms': { type: 'string', description: 'request timeout (default 10000)', valueName: 'ms' },
    retry: { type: 'string', description: 'add X-Webhook-Retry: N, the delivery attempt (integer >= 1)', valueName: 'N' },
    'timestamp-format': { type: 'string', description: 'hmac-sha256: unix (default) or iso', valueName: 'unix|iso' },
    'signature-format': { type: 'string', description: 'hmac-sha256: v1 (default, v1=<hex>) or bare (hex)', valueName: 'v1|bare' },
  },
  mutating: true,
  async run(args, ctx) {
    const demo = flag(args, 'demo');
    const file = stringOption(args, 'file');
    if (demo === (file !== undefined)) throw new UsageError('give exactly one of --file and --demo');
    const sourceId = stringOption(args, 'source') ?? (demo ? DEMO_SOURCE : undefined);
    if (!sourceId) throw new UsageError('--source is required with --file');
    const timeoutRaw = stringOption(args, 'timeout-ms') ?? '10000';
    if (!/^\d+$/.test(timeoutRaw) || Number(timeoutRaw) < 1) throw new UsageError('--timeout-ms must be a positive integer');
    const retry = intOption(args, 'retry', 1);
    if (retry !== undefined && !Number.isSafeInteger(retry)) throw new UsageError('--retry is too large');
    const timestampFormat = stringOption(args, 'timestamp-format') ?? 'unix';
    if (timestampFormat !== 'unix' && timestampFormat !== 'iso') throw new UsageError('--timestamp-format must be unix or iso');
    const signatureFormat = stringOption(args, 'signature-format') ?? 'v1';
    if (signatureFormat !== 'v1' && signatureFormat !== 'bare') throw new UsageError('--signature-format must be v1 or bare');
    const url = webhookUrl(stringOption(args, 'url') ?? ctx.env.INGRESS_URL ?? DEFAULT_INGRESS_URL, sourceId);

    let sources;
    try {
      // SOURCES_FROM=postgres: the secrets the running ingresses verify with, opened with BRIDGE_SECRET_KEYS.
      if (ctx.env.SOURCES_FROM === 'postgres') sources = await webhookSourcesFromDatabase(ctx.pool(), keyringFromEnv(ctx.env));
      else {
        const sourcesFile = ctx.env.WEBHOOK_SOURCES_FILE;
        if (!sourcesFile)
          throw new CommandFailed(
            "WEBHOOK_SOURCES_FILE is not set (the sources file with each source's scheme and secrets), nor SOURCES_FROM=postgres",
          );
        sources = loadSources(sourcesFile, ctx.env);
      }
    } catch (error) {
      if (error instanceof SourcesConfigError || error instanceof SecretKeyError) throw new CommandFailed(error.message);
      throw error;
    }
    const source = sources.find((s) => s.id === sourceId);
    if (!source) throw new CommandFailed(`unknown source "${sourceId}"; known: ${sources.map((s) => s.id).join(', ')}`);
    if (source.scheme !== 'hmac-sha256' && (timestampFormat !== 'unix' || signatureFormat !== 'v1'))
      throw new UsageError(`--timestamp-format and --signature-format are for hmac-sha256 sources; "${sourceId}" uses ${source.scheme}`);
    const secretId = stringOption(args, 'secret-id');
    const secret = secretId ? source.secrets.find((s) => s.id === secretId) : source.secrets[0];
    if (!secret) throw new CommandFailed(`source "${sourceId}" has no secret "${secretId}"`);

    let body: Buffer;
    if (file) {
      try {
        body = await readFile(file);
      } catch (error) {
        throw new CommandFailed(`cannot read ${file}: ${(error as Error).message}`);
      }
    } else {
      body = Buffer.from(JSON.stringify(sampleThemeEvent({ tenant_id: source.tenants[0] ?? 'tenant_acme' })));
    }
    let eventId: string | undefined;
    try {
      const parsed = JSON.parse(body.toString('utf8')) as { event_id?: unknown };
      if (typeof parsed.event_id === 'string') eventId = parsed.event_id;
    } catch {
      // Sending invalid JSON on purpose is a legitimate test of the ingress; it answers 400.
    }
    const id = eventId ?? `msg_${randomUUID()}`;
    const headers = signWebhook({ scheme: source.scheme, secret: secret.value, body, id, timestampFormat, signatureFormat });
    if (retry !== undefined) headers[RETRY_HEADER] = String(retry);
    const signatureHeader = SIGNATURE_HEADERS[source.scheme].signature;
    const shownHeaders = { ...headers, [signatureHeader]: redactSignature(headers[signatureHeader] ?? '') };

    if (flag(args, 'dry-run')) {
      ctx.out.result(
        {
          dry_run: true,
          url,
          source: source.id,
          scheme: source.scheme,
          secret_id: secret.id,
          event_id: id,
          headers: shownHeaders,
          body_bytes: body.length,
        },
        [
          `POST ${url} (dry run: nothing sent)`,
          ...Object.entries(shownHeaders).map(([k, v]) => `${k}: ${v}`),
          '',
          body.toString('utf8'),
        ].join('\n'),
      );
      return;
    }

    let response: Response;
    try {
      response = await fetch(url, { method: 'POST', headers, body, signal: AbortSignal.timeout(Number(timeoutRaw)) });
    } catch (error) {
      throw new CommandFailed(
        `POST ${url} failed: ${(error as Error).cause instanceof Error ? ((error as Error).cause as Error).message : (error as Error).message}`,
      );
    }
    const text = await response.text();
    let responseJson: unknown = text;
    try {
      responseJson = JSON.parse(text);
    } catch {
      // Not JSON: keep the text.
    }
    const ok = response.status >= 200 && response.status < 300;
    ctx.out.result(
      {
        ok,
        status: response.status,
        url,
        event_id: id,
        source: source.id,
        response: responseJson,
        retry_after: response.headers.get('retry-after'),
      },
      `POST ${url} event ${id}\n${response.status} ${response.statusText}\n${text}`,
    );
    return ok ? 0 : 1;
  },
};
