// The ingress's memory under its worst admitted input: many concurrent webhooks near the body limit,
// made of small JSON objects (which parse into several times their size on the heap).
//   npx tsx bench/ingress/big-bodies.ts      (BENCH_BIG_CONCURRENCY, default 128; BENCH_BIG_ROUNDS, default 3)
// One ingress from its bundle with npm start's flags and environment (infra/dev/services.ts); each
// round sends every body at once and waits for every answer (202, or 503 past
// MAX_INFLIGHT_BODY_BYTES, which is how the ingress sheds this load). Prints the answers and the
// ingress's VmHWM after each round, for sizing its container.
import http from 'node:http';
import { buildBundles } from '../../infra/build/build.ts';
import { serviceSpecs } from '../../infra/dev/services.ts';
import { parseBrokers } from '#plumbing/kafka/client.ts';
import { sampleThemeEvent } from '#domain/contract/index.ts';
import { signWebhook } from '#domain/signing/index.ts';
import { benchTopic, secret, startServer } from './load.ts';

const CONCURRENCY = Number(process.env.BENCH_BIG_CONCURRENCY ?? 128);
const ROUNDS = Number(process.env.BENCH_BIG_ROUNDS ?? 3);
// ~860 KiB: under the broker's 1 MiB record limit and the ingress's 1 MiB body limit.
const SWATCHES = 38_000;

const { ingressEnv, remove } = await benchTopic('bench-big-bodies', parseBrokers(process.env.KAFKA_BROKERS ?? '127.0.0.1:9092'));
const [bundle] = (await buildBundles([serviceSpecs.ingress.main])) as [string];
// Every body comes from one address: lifting the per-client share to the whole budget measures the
// most the ingress admits at once (what many providers, or one behind a proxy, can send).
const server = await startServer(
  bundle,
  { ...serviceSpecs.ingress.env, ...ingressEnv, MAX_CLIENT_BODY_BYTES: String(64 * 1024 * 1024) },
  serviceSpecs.ingress.nodeArgs,
  true,
);
const requests = Array.from({ length: CONCURRENCY }, (_, i) => {
  const event = sampleThemeEvent({ resource: { id: `theme_big_${i}` } });
  (event.data as Record<string, unknown>).swatches = Array.from({ length: SWATCHES }, (_, j) => ({ c: j % 97, w: [j, 1] }));
  const body = Buffer.from(JSON.stringify(event));
  const headers = signWebhook({ scheme: 'hmac-sha256', secret, body, id: event.event_id });
  return { body, headers: { ...headers, 'content-length': String(body.length) } };
});
const agent = new http.Agent({ keepAlive: true, maxSockets: CONCURRENCY });
const send = (r: (typeof requests)[number]) =>
  new Promise<number>((resolve) => {
    const req = http.request(
      { host: '127.0.0.1', port: server.port, method: 'POST', path: '/webhooks/demo', agent, headers: r.headers },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      },
    );
    req.on('error', () => resolve(0));
    req.end(r.body);
  });
console.log(
  `ingress: node ${serviceSpecs.ingress.nodeArgs.join(' ')} ${Object.entries(serviceSpecs.ingress.env)
    .map(([k, v]) => `${k}=${v}`)
    .join(' ')}; ${CONCURRENCY} concurrent bodies of ${requests[0]!.body.length} bytes per round`,
);
for (let round = 1; round <= ROUNDS; round += 1) {
  const answers: Record<string, number> = {};
  for (const status of await Promise.all(requests.map(send))) answers[status] = (answers[status] ?? 0) + 1;
  const alive = server.child.exitCode === null && server.child.signalCode === null;
  console.log(
    `round ${round}: answers ${JSON.stringify(answers)}; ingress ${alive ? `VmHWM ${server.peakRssMb().toFixed(1)} MB` : `exited (${server.child.exitCode ?? server.child.signalCode}; see ${server.logFile})`}`,
  );
  if (!alive) break;
}
agent.destroy();
await server.stop().catch(() => {});
await remove();
