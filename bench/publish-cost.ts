// What one publish costs the broker, by kind: the relay publishes each batch in a Kafka transaction
// (AddPartitionsToTxn, Produce, EndTxn, then the coordinator's markers), the ingress as a plain
// idempotent send. At low rates every event is a batch of its own, so this is the broker's cost per
// event. Each kind runs at a fixed rate (as fast as it can when it cannot keep the rate), the kinds
// alternating round by round, with the bridge's own producers (shared/plumbing/kafka/producers.ts).
// At 25 a second an operation starts well after the previous one ended; at 100 a transaction starts
// as soon as the previous one committed, which is what the relay does under load.
//   npm run bench:publish-cost     (BENCH_RATES=25,100, BENCH_SECONDS=10, BENCH_ROUNDS=3, KAFKA_BROKERS)
// Writes bench/results/publish-cost.md. Run it with nothing else on the machine: the broker's CPU is
// read from /proc, so anything else the broker does counts.
import { writeFileSync } from 'node:fs';
import { cpus, loadavg, totalmem } from 'node:os';
import path from 'node:path';
import type { Producer } from '#plumbing/kafka/types.ts';
import { KAFKA_VERSION } from '../infra/kafka/local-kafka.ts';
import { createKafka, parseBrokers } from '#plumbing/kafka/client.ts';
import { createIdempotentProducer, TRANSACTION_RETRY_INITIAL_MS } from '#plumbing/kafka/producers.ts';
import { createLogger } from '#plumbing/logging/logger.ts';
import { createRelayProducer, RELAY_TRANSACTION_LANES } from '#services/worker/outbox-relay.ts';
import { brokerAge, cpuSnapshot } from './lib/cpu.ts';
import { cpuCalibrationMs } from './lib/machine.ts';
import { fmt, summarise } from './lib/stats.ts';

const RATES = (process.env.BENCH_RATES ?? '25,100').split(',').map(Number);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const brokers = parseBrokers(process.env.KAFKA_BROKERS ?? '127.0.0.1:9092');
const logger = createLogger({ name: 'bench-publish-cost', level: 'warn' });
const kafka = createKafka({ brokers, clientId: 'bench-publish-cost', logger });
const log = (line: string) => console.error(`[bench:publish-cost] ${line}`);

const stamp = `${Date.now().toString(36)}${process.pid.toString(36)}`;
const topic = `bench.publish-cost.${stamp}`;
const admin = kafka.admin();
await admin.connect();
await admin.createTopics({ topics: [{ topic, numPartitions: 12, replicationFactor: 1 }], waitForLeaders: true });

const value = Buffer.alloc(1024, 'x');
const records = (n: number, count: number) => Array.from({ length: count }, (_, i) => ({ key: `theme-${n}-${i}`, value }));

interface Kind {
  name: string;
  once: (n: number) => Promise<void>;
}
const plain = createIdempotentProducer(kafka);
const transactional = createIdempotentProducer(kafka, { transactionalId: `bench-publish-cost-${stamp}` });
// The relay's own producer: transactional lanes taken in turn (shared/plumbing/kafka/transaction-lanes.ts).
const relay = createRelayProducer(kafka, `bench-publish-cost-relay-${stamp}`, logger, 10_000);
await plain.connect();
await transactional.connect();
await relay.connect();
const inTransaction = (producer: Producer, count: number) => async (n: number) => {
  const transaction = await producer.transaction();
  await transaction.send({ topic, acks: -1, messages: records(n, count) });
  await transaction.commit();
};
const kinds: Kind[] = [
  { name: 'idempotent send, 1 record (the ingress)', once: (n) => plain.send({ topic, acks: -1, messages: records(n, 1) }).then(() => {}) },
  { name: 'transaction, 1 record (the relay, one event per pass)', once: inTransaction(transactional, 1) },
  { name: 'transaction, 10 records over the partitions', once: inTransaction(transactional, 10) },
  {
    name: `transaction, 1 record, the relay's ${RELAY_TRANSACTION_LANES} lanes in turn`,
    once: (n) => relay.use((p) => inTransaction(p, 1)(n), 10_000, 'relay_send_timeout', 'bench'),
  },
  { name: 'nothing sent (the broker idle, for reference)', once: async () => {} },
];

interface Round {
  rate: number;
  kind: number;
  ops: number;
  seconds: number;
  brokerCpuSeconds: number;
  latency: number[];
}
const rounds: Round[] = [];
const calibrationBefore = cpuCalibrationMs();
const age = brokerAge();
for (const RATE of RATES) {
  for (let round = 1; round <= ROUNDS; round += 1) {
    for (const [k, kind] of kinds.entries()) {
      const latency: number[] = [];
      const before = cpuSnapshot();
      const started = performance.now();
      let n = 0;
      while (performance.now() - started < SECONDS * 1000) {
        const wait = started + (n * 1000) / RATE - performance.now();
        if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
        const t0 = performance.now();
        await kind.once(n);
        latency.push(performance.now() - t0);
        n += 1;
      }
      const seconds = (performance.now() - started) / 1000;
      const brokerCpuSeconds = cpuSnapshot().kafka - before.kafka;
      rounds.push({ rate: RATE, kind: k, ops: n, seconds, brokerCpuSeconds, latency });
      log(`${RATE}/s round ${round}, ${kind.name}: ${fmt(n / seconds, 0)}/s, broker ${fmt((100 * brokerCpuSeconds) / seconds)}% of a core`);
    }
  }
}
const calibrationAfter = cpuCalibrationMs();
await plain.disconnect();
await transactional.disconnect();
await relay.close();
await admin.deleteTopics({ topics: [topic] });
await admin.disconnect();

const idle = rounds.filter((x) => x.kind === kinds.length - 1);
const idleCpuPerSecond = summarise(idle.map((r) => r.brokerCpuSeconds / r.seconds)).p50;
const extraMs = (r: Round) => ((r.brokerCpuSeconds - idleCpuPerSecond * r.seconds) * 1000) / r.ops;
const row = (r: Round, round: number) => {
  const l = summarise(r.latency);
  return `| ${r.rate} | ${round} | ${kinds[r.kind]!.name} | ${fmt(r.ops / r.seconds, 0)} | ${fmt((100 * r.brokerCpuSeconds) / r.seconds)}% | ${r.kind === kinds.length - 1 ? '' : fmt(extraMs(r), 2)} | ${fmt(l.p50, 1)} / ${fmt(l.p99, 1)} |`;
};
const medians = RATES.flatMap((rate) => {
  const base = summarise(rounds.filter((r) => r.rate === rate && r.kind === 0).map(extraMs)).p50;
  return kinds.slice(0, -1).map((kind, k) => {
    const mine = rounds.filter((r) => r.rate === rate && r.kind === k);
    const extra = summarise(mine.map(extraMs)).p50;
    const latency = summarise(mine.flatMap((r) => r.latency));
    return `| ${rate} | ${kind.name} | ${fmt(summarise(mine.map((r) => r.ops / r.seconds)).p50, 0)} | ${fmt(extra, 2)} ms | ${fmt(extra / base, 1)}× | ${fmt(latency.p50, 1)} / ${fmt(latency.p99, 1)} |`;
  });
});
const report = `# What a publish costs the broker

Command: \`npm run bench:publish-cost\` (bench/publish-cost.ts). Run: ${new Date().toISOString()}.

Machine: ${cpus().length} × ${cpus()[0]?.model.split(' ').slice(0, 2).join(' ') ?? 'cpu'}, ${(totalmem() / 2 ** 30).toFixed(1)} GiB RAM; Node ${process.version};
Apache Kafka ${KAFKA_VERSION} (single local broker at ${brokers.join(',')}, the same machine). CPU calibration (bench/lib/machine.ts,
lower is faster): before ${fmt(calibrationBefore, 0)} ms, after ${fmt(calibrationAfter, 0)} ms. Broker up ${age ? fmt(age.uptimeSeconds / 60) : '?'} min.
Load average (1 min) at the end: ${fmt(loadavg()[0]!, 2)}.

Set-up: one topic of 12 partitions, 1 KiB records, acks=all; the bridge's producers (idempotent, one request in
flight; the transactional one with its first CONCURRENT_TRANSACTIONS retry after ${TRANSACTION_RETRY_INITIAL_MS} ms). Each kind runs
${SECONDS} s at a fixed rate (${RATES.join(' and ')} operations a second), one operation after the other (the next starts when the
previous ended, so a kind that cannot keep the rate runs as fast as it can), the kinds alternating, ${ROUNDS} rounds per rate. Broker CPU is its process's
user + system time from /proc; "extra" takes off what the broker used idle in the same run (median of the idle rounds).
The relay's lanes are transactional producers with ids of their own taken in turn (shared/plumbing/kafka/transaction-lanes.ts):
when one id's transaction starts right after its previous commit, the broker is still writing that commit's markers and refuses
it (CONCURRENT_TRANSACTIONS) until they are written, which is what caps one id back to back well below 100 a second.

Medians over the rounds (latency over every operation of the kind):

| rate asked (/s) | kind | operations/s | extra broker CPU per operation | against an idempotent send | client latency p50 / p99 (ms) |
|---:|---|---:|---:|---:|---|
${medians.join('\n')}

Every round:

| rate asked (/s) | round | kind | operations/s | broker CPU (% of a core) | extra broker CPU per operation (ms) | client latency p50 / p99 (ms) |
|---:|---:|---|---:|---:|---:|---|
${rounds.map((r, i) => row(r, (Math.floor(i / kinds.length) % ROUNDS) + 1)).join('\n')}
`;
writeFileSync(path.join(import.meta.dirname, 'results', 'publish-cost.md'), report);
console.log(report);
