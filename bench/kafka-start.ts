// Measures the local broker's start times: cold (empty Maven repository and jar cache, so the jars
// are downloaded from Maven Central, then format and start) and warm (cached jars, formatted data).
//   npm run bench:kafka-start            (writes bench/results/kafka-start.md and .json)
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir, cpus, totalmem } from 'node:os';
import path from 'node:path';
import { machineNow, versionsNow, writeBenchResult } from './lib/results.ts';

const scratch = mkdtempSync(path.join(tmpdir(), 'kafka-start-'));
process.env.BRIDGE_CACHE_DIR = path.join(scratch, 'cache');
// A private Maven repository makes the first start a true download from Maven Central.
process.env.MAVEN_OPTS = `${process.env.MAVEN_OPTS ?? ''} -Dmaven.repo.local=${path.join(scratch, 'm2')}`;
const { LocalKafka, KAFKA_VERSION } = await import('../infra/provision/kafka/local-kafka.ts');

const kafka = new LocalKafka({ name: 'bench', nodes: 1, basePort: 49092 });
const timings: Record<string, number> = {};
const ranAt = new Date().toISOString();
try {
  let t0 = Date.now();
  await kafka.start(180_000);
  timings.cold = Date.now() - t0;
  await kafka.stop();
  const warm: number[] = [];
  for (let i = 0; i < 3; i++) {
    t0 = Date.now();
    await kafka.start();
    warm.push(Date.now() - t0);
    await kafka.stop();
  }
  timings.warmMedian = warm.sort((a, b) => a - b)[1]!;
  const report = [
    '# Local broker start times',
    '',
    `Measured ${new Date().toISOString()} with \`npm run bench:kafka-start\`.`,
    `Machine: ${cpus().length} x ${cpus()[0]?.model ?? 'cpu'}, ${(totalmem() / 2 ** 30).toFixed(1)} GiB RAM; Apache Kafka ${KAFKA_VERSION}; Node ${process.version}.`,
    '',
    '| start | time to ready (admin describeCluster succeeds) |',
    '|---|---|',
    `| cold: jars downloaded from Maven Central into an empty cache, storage formatted, broker started | ${(timings.cold / 1000).toFixed(1)} s |`,
    `| warm: cached jars, formatted data folder (median of 3) | ${(timings.warmMedian / 1000).toFixed(1)} s (runs: ${warm.map((w) => (w / 1000).toFixed(1)).join(', ')} s) |`,
    '',
  ].join('\n');
  writeFileSync(path.join(import.meta.dirname, 'results', 'kafka-start.md'), report);
  writeBenchResult({
    name: 'kafka-start',
    command: 'npm run bench:kafka-start',
    ranAt,
    machine: machineNow(),
    versions: versionsNow({ kafka: KAFKA_VERSION }),
    settings: { warmStarts: warm.length },
    rounds: [{ start: 'cold', seconds: timings.cold / 1000 }, ...warm.map((w) => ({ start: 'warm', seconds: w / 1000 }))],
    summary: [
      { label: 'cold start, jars downloaded', unit: 's', values: [timings.cold / 1000] },
      { label: 'warm start', unit: 's', values: warm.map((w) => w / 1000) },
    ],
  });
  console.log(report);
} finally {
  await kafka.stop();
  rmSync(scratch, { recursive: true, force: true });
}
