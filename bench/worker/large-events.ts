// A backlog of large events through the worker, with npm start's flags (infra/services.ts): the
// worker is stopped (SIGSTOP), N signed events with a SIZE-byte field are posted through the
// ingress, then the worker resumes and drains them. Prints its peak RSS, or that it died.
//   N=400 SIZE=950000 npx tsx bench/worker/large-events.ts        (WORKER_RELAY=thread to compare)
import pg from 'pg';
import { loadDevEnv } from '../../infra/bootstrap.ts';
import { parseBrokers } from '#plumbing/kafka/client.ts';
import { createLogger } from '#plumbing/logging/logger.ts';
import { sampleThemeEvent } from '#domain/contract/index.ts';
import { signWebhook } from '#domain/signing/index.ts';
import { startBridge, waitReady } from '../lib/bridge.ts';
import { procStatusMb } from '../lib/rss.ts';

loadDevEnv();
const N = Number(process.env.N ?? 300);
const SIZE = Number(process.env.SIZE ?? 600 * 1024);
const secret = process.env.DEMO_SECRET!;
const bridge = await startBridge({
  name: 'large',
  brokers: parseBrokers('127.0.0.1:9092'),
  logger: createLogger({ name: 'x', level: 'warn' }),
  log: console.error,
  logLevel: 'info',
});
await waitReady(bridge.ingress);
await waitReady(bridge.worker);
process.kill(bridge.worker.pid, 'SIGSTOP');
let ok = 0;
const t0 = Date.now();
await Promise.all(
  Array.from({ length: 8 }, async (_, lane) => {
    for (let i = lane; i < N; i += 8) {
      const event = sampleThemeEvent({ resource: { id: `thm_big_${i}`, version: 1 } });
      (event.data as Record<string, unknown>).description = 'y'.repeat(SIZE);
      const body = Buffer.from(JSON.stringify(event));
      const headers = signWebhook({ scheme: 'hmac-sha256', secret, body, id: event.event_id });
      const r = await fetch(`http://127.0.0.1:${bridge.ingressPort}/webhooks/demo`, {
        method: 'POST',
        body,
        headers: headers as Record<string, string>,
      });
      if (r.status < 300) ok += 1;
      else if (i < 16) console.error('status', r.status, await r.text());
    }
  }),
);
console.error(`posted ${ok}/${N} in ${Date.now() - t0} ms`);
process.kill(bridge.worker.pid, 'SIGCONT');
const db = new pg.Client({ connectionString: bridge.databaseUrl });
await db.connect();
let peak = 0;
for (const deadline = Date.now() + 120_000; Date.now() < deadline;) {
  peak = Math.max(peak, procStatusMb(bridge.worker.pid, 'VmRSS') || 0);
  const { rows } = await db.query<{ n: string }>('SELECT count(*) AS n FROM inbox_events');
  const unpublished = (
    await db.query<{ n: string }>(
      'SELECT count(*) AS n FROM applied_outbox o WHERE (o.tx, o.id) > (SELECT last_tx, last_id FROM applied_outbox_batches ORDER BY id DESC LIMIT 1)',
    )
  ).rows[0]?.n;
  if (bridge.worker.child.exitCode !== null) {
    console.error('worker exited', bridge.worker.child.exitCode);
    break;
  }
  if (Number(rows[0]!.n) >= ok && unpublished === '0') {
    console.error(
      `applied ${rows[0]!.n} and published, worker peak VmRSS ${peak.toFixed(0)} MB, VmHWM ${procStatusMb(bridge.worker.pid, 'VmHWM').toFixed(0)} MB`,
    );
    break;
  }
  await new Promise((r) => setTimeout(r, 100));
}
await db.end();
console.error('worker log', bridge.worker.logFile);
await bridge.stop();
