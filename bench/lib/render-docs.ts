// Renders docs/benchmarks.md, and the README's list of headline figures, from the latest
// bench/results/*.json, so both quote every figure from the run that measured it and cannot drift. The prose here says what each benchmark
// measures and how to run it; the figures come only from the results.
//   npm run bench:docs              (writes docs/benchmarks.md and the README's headline figures)
//   tsx bench/lib/render-docs.ts --check   exit 1 when either is stale
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { readBenchResults, RESULTS_DIR, type BenchResult, type BenchRun, type Figure } from './results.ts';
import { spread } from './spread.ts';

export const BENCHMARKS_DOC = path.resolve(import.meta.dirname, '..', '..', 'docs', 'benchmarks.md');
export const README = path.resolve(import.meta.dirname, '..', '..', 'README.md');
const HEADLINES_START = '<!-- bench:headlines (npm run bench:docs writes this list from bench/results/*.json) -->';
const HEADLINES_END = '<!-- /bench:headlines -->';

interface Entry {
  /** The results file's name (bench/results/<name>.json and .md). */
  name: string;
  title: string;
  /** What it measures and how, in a paragraph; no figures. */
  measures: string;
  /** Extra results beside the .md (a chart). */
  extra?: string[];
}

/** Every benchmark that writes a results file, in the order the page shows them. */
export const CATALOGUE: Entry[] = [
  {
    name: 'ingress',
    title: 'Ingress against bare node:http',
    measures: `\`bench/ingress/run.ts\` warms (a) a bare node:http server that reads the body and answers 202 and (b) the ingress
(verified and published, \`acks=all\`), then alternates rounds of (a) and (b) at full rate and reports the per-round ratio
b/a, the p99 latency at half of (b)'s peak rate (open loop: latency counts from each request's due time), peak RSS and
server CPU per request, then (b) again with Node's default flags. It checks that the records on the topic equal the 2xx
answers. Load: 100 keep-alive connections from one Node process, 1 KiB hmac-sha256-signed \`theme.updated\` bodies.
Both servers run from esbuild bundles, as \`npm start\` runs the ingress. \`BENCH_ROUNDS\`, \`BENCH_DURATION_MS\`,
\`BENCH_WARMUP_MS\`, \`BENCH_CONNECTIONS\`, \`BENCH_POOL\`, \`BENCH_NODE_FLAGS\`, \`BENCH_LOG_LEVEL\`, \`KAFKA_BROKERS\` adjust it.`,
  },
  {
    name: 'ingress-flags',
    title: 'Ingress node flags, process by process',
    measures: `\`bench/ingress/flags.ts\` compares ways of starting the ingress: \`BENCH_FLAG_SETS\` holds sets of node flags
separated by \`|\` (\`from=source\` runs the sources through tsx; a \`NAME=value\` token is an environment variable), each
set runs in \`BENCH_PROCESSES\` fresh processes, the sets alternating, each process warmed up and measured for
\`BENCH_ROUNDS\` rounds at full rate. It reports every process's req/s, CPU per request and VmHWM, because the peak RSS
varies from process to process more than from round to round.`,
  },
  {
    name: 'ingress-connections',
    title: 'New connections at a busy ingress',
    measures: `\`bench/ingress/connection-burst.ts\` starts the ingress with each \`LISTEN_SOCKETS\` of \`BENCH_SOCKET_SETS\`
(the sets alternating process by process) and, for \`BENCH_ROUNDS\` rounds, drives it with two loads at once: a closed
loop on \`BENCH_KEEPALIVE_CONNECTIONS\` keep-alive connections, which keeps its event loop busy, and \`BENCH_NEW_RATE\`
requests a second (open loop) each on a new connection, as senders without keep-alive post. It reports the new
connections' latency from their due time, the keep-alive throughput, and how deep the port's accept queues got
(\`ss\`). Node accepts one connection per listening socket and turn of the event loop, so this is where one socket
and several differ.`,
  },
  {
    name: 'worker',
    title: 'Worker throughput and its ceilings',
    measures: `\`bench/worker/run.ts\` preloads events over many resources (a tenth exact redeliveries, a tenth stale
versions) to a fresh 12-partition topic. In alternating rounds it times one worker process (a fresh consumer group and
database each round) from its first fetched batch to its last offset commit and on until the applied topic is fully
published, then the same with the relay in a process of its own (\`WORKER_ROLE=apply\` beside \`WORKER_ROLE=relay\`), then
drives the same apply path straight at Postgres (the same-SQL ceiling), then writes the same rows with COPY (the COPY
ceiling, \`bench/worker/copy-ceiling.ts\`). It reports each round, CPU per applied and published event of the worker,
Postgres and the broker from \`/proc\` (and up to the last commit), and each process's peak RSS.
\`BENCH_ROUNDS\`, \`BENCH_RESOURCES\`, \`BENCH_BATCH_SIZE\`, \`BENCH_CONCURRENCY\`, \`BENCH_MAX_BYTES_PER_PARTITION\`,
\`BENCH_SEMI_SPACE_MB\` scale it; \`BENCH_WORKER_NODE_ARGS\` passes Node flags to the worker (a CPU profile),
\`BENCH_GC_STATS=1\`, \`BENCH_PROMOTION_PROFILE=<file>\` and \`BENCH_MEMORY_SAMPLES=1\` look at its heap, and
\`BENCH_LOOP_DELAY=1\` prints its event loop delay while it applies and while only the relay publishes, and
\`BENCH_RELAY_NODE_ARGS\` (in \`BENCH_AB_ENV\`) passes Node flags to the relay process alone.`,
  },
  {
    name: 'scaling',
    title: 'One, two and three workers',
    measures: `\`bench/worker/scale.ts\` drains one preloaded backlog with 1, 2 and 3 worker processes in one group
(\`BENCH_WORKERS\`), alternating the counts over \`BENCH_ROUNDS\` rounds, and reports the rate between 5% and 95% of the
backlog once every worker is in the stable group, with CPU per event of the workers, their Postgres backends and the
broker. What the figures say about sizing: [scaling.md](scaling.md).`,
  },
  {
    name: 'e2e',
    title: 'End to end: POST to applied record',
    measures: `\`bench/e2e/run.ts\` starts the bridge as \`npm start\` does (the ingress and one worker as separate processes
with their production flags) against a fresh database and fresh topics, and drives the ingress open loop at fixed rates
after a warm-up, each phase drained before the next, with unique events so every 2xx must apply. Per rate it reports
p50 / p99 / max of POST to record on the applied topic and of its stages (POST to broker ack, ack to worker commit,
commit to published), the ledger (2xx = applied records), peak RSS per service, CPU per process and the share of other
processes on the machine. Right after each rate's bridge phase it measures the floor of the same path through Kafka
alone (\`bench/e2e/floor.ts\`), on fresh topics with the bridge's client and settings: records of the same size produced
open loop with acks=all by an idempotent producer, consumed by a consumer-group member in its own process and re-produced
there in one Kafka transaction per fetch by the relay's transactional producer, read by a read_committed consumer; it
reports bridge p99 / floor p99 per rate and stage by stage. The results file keeps the recent runs (\`BENCH_RUNS_KEPT\`),
so the ratios show with their spread over runs. \`--rates=\`, \`--duration-ms=\`, \`--warmup-ms=\`, \`BENCH_FLOOR=0\`,
\`BENCH_COMMIT_POLL_MS\`, \`BENCH_EVENTS_CSV=<file>\` (every event's points in time), \`BENCH_SERVICE_NODE_ARGS\` and the
other \`BENCH_*\` variables of its header adjust it.`,
  },
  {
    name: 'soak',
    title: 'Soak: RSS, lag and latency over time',
    measures: `\`bench/soak/run.ts\` starts the bridge as bench:e2e does and drives it open loop at one rate (half of the
highest rate sustained end to end) for 20 minutes, sampling every 10 s each service's RSS, event-loop delay, the worker
group's lag, POST to applied p50 / p99 and the bench's own loop delay and GC. It exits 0 when every criterion of
\`bench/soak/criteria.ts\` holds: RSS growth after the warm-up under 10% and under 512 B per request, lag back to 0
within 10 s, an exact ledger, no upward drift of the p99, and the schedule answered 2xx. The drift compares the 90th
percentile of the samples' p99s over the last 5 minutes of load with that over the first 5 after the warm-up (within
1.5×): one noisy sample cannot decide it, and the recorded runs it was chosen on are in bench/JOURNAL.md.
\`--rate=\`, \`--duration-ms=\`, \`--warmup-ms=\`, \`--sample-ms=\`, \`--out=\` adjust it, \`--drift=report\` prints the drift
without judging it and \`--lag-zero-within-ms=\` sets another lag bound; in \`npm test\`, test/soak/soak.test.ts runs it
for 3 minutes at half the rate with both, judging behaviour, not speed.`,
    extra: ['soak.svg'],
  },
  {
    name: 'soak-60min',
    title: 'Soak, one hour',
    measures: `The same soak for an hour: \`npm run bench:soak -- --duration-ms=3600000 --out=bench/results/soak-60min.md\`.`,
    extra: ['soak-60min.svg'],
  },
  {
    name: 'publish-cost',
    title: 'What a publish costs the broker',
    measures: `\`bench/publish-cost.ts\` measures the broker's CPU per operation of an idempotent send of one record (the
ingress's kind), a transaction of one record (the relay's, one event per pass), a transaction of ten records, the relay's
own transactional lanes, and nothing (the broker idle), each at a fixed rate, alternating over rounds, with the bridge's
own producers. Broker CPU comes from /proc, less what it used idle. \`BENCH_RATES\`, \`BENCH_SECONDS\`,
\`BENCH_ROUNDS\`, \`KAFKA_BROKERS\`.`,
  },
  {
    name: 'kafka-clients',
    title: 'kafkajs and @platformatic/kafka side by side',
    measures: `\`bench/kafka-clients/run.ts\` runs both clients on the bridge's hot paths, each path of each client in a process
of its own, the clients alternating round by round, on fresh 12-partition topics with the worker bench's records (the
contract's theme snapshots keyed by resource, with the ingress's or the relay's headers): the ingress path (an idempotent
producer, acks=all, 64 callers each sending 1-50 records through the ingress's coalescing, one batch in flight; records/s
and send p50 / p99), the worker's fetch path (a group member reading 200,000 preloaded records from the beginning to the
end offsets, keys, values and headers decoded to text; records/s) and the relay path (two transactional lanes taken in
turn, 500 records a transaction; transactions/s), with CPU per record and peak RSS of each child. Ratios are
platformatic / kafkajs per round. A run counts only when its ledger balances: the records on the ingress's topic equal
the records acknowledged, and a read_committed reader finds on the relay's topic exactly the records committed. The decision they feed: [architecture.md](architecture.md#the-kafka-client). \`BENCH_ROUNDS\`,
\`BENCH_DURATION_MS\`, \`BENCH_WARMUP_MS\`, \`BENCH_CALLERS\`, \`BENCH_FETCH_RESOURCES\`, \`BENCH_TX_RECORDS\`,
\`BENCH_LANES\`, \`BENCH_PATHS\`, \`KAFKA_BROKERS\`.`,
  },
  {
    name: 'console',
    title: "The console's pages on a big bridge",
    measures: `\`bench/console/run.ts\` fills a fresh database with 1,000,000 inbox rows over 30 days and a fresh
12-partition DLQ with 100,000 dead letters over 29 days (\`test/kit/big-bridge.ts\`: the data on which
\`test/console/cheap-pages.test.ts\` checks what the pages read), starts the console from its bundle as \`npm start\`
runs it, and after a warm-up round requests every page once a round: the overview; search by event id, idempotency key,
trace id, resource key and resource id; the dead letters' newest page, one tenant's, one reason's, one day's, the next
older page and one record. Each answer is checked (status 200 and the records it must show), and each dead-letter list
page's records read from the broker are reported. It exits 1 when a page's median over the rounds misses its goal:
250 ms for search, which reads Postgres only, 1,000 ms for the pages that also ask the broker.
\`BENCH_ROUNDS\`, \`BENCH_KEEP\`, \`BENCH_LOG_LEVEL\`, \`KAFKA_BROKERS\`, \`DATABASE_URL\`.`,
  },
  {
    name: 'sources',
    title: 'A change to sources reaching every ingress',
    measures: `\`bench/sources/propagation.ts\` starts two ingresses that read sources from Postgres (\`SOURCES_FROM=postgres\`,
as \`npm start\` runs them) over a fresh database and topic. Each round creates a source through the catalog, rotates its
secret with no overlap and disables it, and times each change from its commit until each ingress answers as the change
says (202 with the new secret; 401 with the old one and 202 with the new; 401), asking every \`BENCH_POLL_MS\`. It exits 1
when a change took longer than 2 s to reach an ingress. \`BENCH_ROUNDS\`, \`BENCH_POLL_MS\`, \`BENCH_LOG_LEVEL\`,
\`KAFKA_BROKERS\`, \`DATABASE_URL\`.`,
  },
  {
    name: 'kafka-start',
    title: 'Local broker start',
    measures: `\`bench/kafka-start.ts\` measures the local broker's time to ready (an admin \`describeCluster\` succeeds):
cold (an empty Maven repository and jar cache, so the jars are downloaded, then format and start) and warm (cached jars,
formatted data folder).`,
  },
];

/** Tools that print their figures instead of writing a results file. */
const PRINTING_TOOLS: Array<{ what: string; command: string }> = [
  { what: 'Postgres CPU of the apply path and the relay', command: 'npx tsx bench/worker/pg-cpu.ts [resources] [chunk] [warm]' },
  { what: "the relay's CPU alone, against the broker", command: 'npx tsx bench/worker/relay-cpu.ts [resources]' },
  { what: 'the plans of one chunk transaction', command: 'npx tsx bench/worker/explain-chunk.ts [chunkSize] [warmChunks]' },
  { what: 'the COPY ceiling statement by statement', command: 'npx tsx bench/worker/copy-ceiling.ts [resources] [concurrency] [rounds]' },
  { what: "the ingress's peak RSS under its largest bodies", command: 'npx tsx bench/ingress/big-bodies.ts' },
];

/** A figure's value at a precision that suits its size. */
export function formatValue(value: number, unit: string): string {
  if (!Number.isFinite(value)) return 'n/a';
  const abs = Math.abs(value);
  if (Number.isInteger(value)) return value.toLocaleString('en');
  if (unit === '%' || abs >= 100) return Math.round(value).toLocaleString('en');
  if (abs >= 10 || unit === 's') return value.toFixed(1);
  return value.toFixed(2);
}

/** The range of a figure's values, "low–high unit", or the one value when they agree. */
export function formatRange(figure: Figure): string {
  const finite = figure.values.filter((v) => Number.isFinite(v));
  const unit = figure.unit === '' ? '' : figure.unit === '%' ? '%' : ` ${figure.unit}`;
  if (finite.length === 0) return 'n/a';
  const low = formatValue(Math.min(...finite), figure.unit);
  const high = formatValue(Math.max(...finite), figure.unit);
  return `${low === high ? low : `${low}–${high}`}${unit}`;
}

const link = (file: string) => `[bench/results/${file}](../bench/results/${file})`;

function runLine(result: BenchResult): string {
  const m = result.machine;
  const parts = [
    `Run ${result.ranAt.slice(0, 16).replace('T', ' ')} UTC, \`${result.command}\``,
    `${m.cpus} × ${m.cpuModel}${m.memoryGiB === undefined ? '' : `, ${m.memoryGiB} GiB RAM`}`,
  ];
  if (m.loadAverage) parts.push(`load average ${m.loadAverage.before} before, ${m.loadAverage.after} after`);
  if (result.calibrationMs) parts.push(`CPU calibration ${result.calibrationMs.before} ms before, ${result.calibrationMs.after} ms after`);
  const v = result.versions;
  const versions = [
    `Node ${v.node}`,
    v.kafka && `Apache Kafka ${v.kafka}`,
    v.postgres && `PostgreSQL ${v.postgres}`,
    v.kafkajs && `kafkajs ${v.kafkajs}`,
    v.platformaticKafka && `@platformatic/kafka ${v.platformaticKafka}`,
  ].filter(Boolean);
  parts.push(versions.join(', '));
  return `${parts.join('; ')}.`;
}

/**
 * The runs a results file keeps, one row each (the latest last), and the spread of every figure
 * over them: low, median and high.
 */
export function runsTable(runs: readonly BenchRun[]): string {
  if (runs.length === 0) return '';
  const labels = [...new Set(runs.flatMap((r) => Object.keys(r.figures)))];
  const value = (v: number | undefined) => (v === undefined ? '' : formatValue(v, ''));
  const rows = runs.map(
    (r) =>
      `| ${r.ranAt.slice(0, 16).replace('T', ' ')} | ${r.loadAverage ? `${r.loadAverage.before} / ${r.loadAverage.after}` : ''} | ${labels.map((l) => value(r.figures[l])).join(' | ')} |`,
  );
  const spreads = labels.map((l) => {
    const s = spread(runs.map((r) => r.figures[l] ?? NaN));
    return s.count === 0 ? 'n/a' : `${formatValue(s.min, '')} / ${formatValue(s.median, '')} / ${formatValue(s.max, '')}`;
  });
  return `| run (UTC) | load average before / after | ${labels.join(' | ')} |
| --- | --- | ${labels.map(() => '--:').join(' | ')} |
${rows.join('\n')}
| **low / median / high over ${runs.length} runs** | | ${spreads.join(' | ')} |
`;
}

function section(entry: Entry, result: BenchResult): string {
  const files = [`${entry.name}.md`, `${entry.name}.json`, ...(entry.extra ?? [])].map(link).join(', ');
  const rows = result.summary.map((f) => `| ${f.label} | ${formatRange(f)} | ${f.values.length} | ${f.target ?? ''} |`);
  const runs = result.runs?.length
    ? `
The runs the results file keeps, each a complete run of the command above:

${runsTable(result.runs)}`
    : '';
  return `## ${entry.title}: \`${result.command}\`

${entry.measures}

${runLine(result)} Results: ${files}.

| figure | range | values | target |
| --- | --- | --: | --- |
${rows.join('\n')}
${runs}`;
}

/** docs/benchmarks.md for these results; throws when a result has no entry or an entry no result. */
export function renderBenchmarksDoc(results: BenchResult[]): string {
  const byName = new Map(results.map((r) => [r.name, r]));
  const unknown = results.filter((r) => !CATALOGUE.some((e) => e.name === r.name)).map((r) => r.name);
  if (unknown.length) throw new Error(`bench/lib/render-docs.ts has no entry for ${unknown.join(', ')}`);
  const missing = CATALOGUE.filter((e) => !byName.has(e.name)).map((e) => e.name);
  if (missing.length) throw new Error(`no bench/results/<name>.json for ${missing.join(', ')}`);
  const index = CATALOGUE.map((e) => `| ${e.title} | \`${byName.get(e.name)!.command}\` | ${link(`${e.name}.json`)} |`);
  const tools = PRINTING_TOOLS.map((t) => `| ${t.what} | \`${t.command}\` | prints |`);
  return `<!-- Generated by \`npm run bench:docs\` (bench/lib/render-docs.ts) from bench/results/*.json; edit those, not this page. -->

# Benchmarks

Each benchmark writes a results file for people (\`bench/results/<name>.md\`) and one for machines
(\`bench/results/<name>.json\`: the machine, CPU calibration where taken, versions, every round and the
summary). This page is rendered from the JSON of the latest run of each; a figure is shown as the
range of its values over the rounds (or samples) of that run, or over the runs the file keeps where it
keeps several. Broker, Postgres, services and load
generators share one machine, so every figure tracks the machine's load: compare runs through the
load average and CPU calibration recorded with them. Investigations behind the settings are in
[bench/JOURNAL.md](../bench/JOURNAL.md).

| benchmark | command | results |
| --- | --- | --- |
${[...index, ...tools].join('\n')}

${CATALOGUE.map((e) => section(e, byName.get(e.name)!)).join('\n')}`;
}

/** The README's headline figures: the figures a newcomer asks for first, each once, with its command. */
const HEADLINES: Array<{ name: string; say: string; figures: Array<{ label: string; as: string }> }> = [
  {
    name: 'ingress',
    say: 'Ingress, verified and published with acks=all',
    figures: [
      { label: 'ingress throughput', as: 'throughput' },
      { label: 'ratio ingress / bare node:http', as: 'against a bare node:http server' },
    ],
  },
  {
    name: 'worker',
    say: 'Worker draining a backlog into Postgres',
    figures: [
      { label: 'worker, first fetch to last commit', as: 'throughput' },
      { label: 'worker peak RSS', as: 'peak RSS' },
    ],
  },
  {
    name: 'e2e',
    say: 'POST to the record on the applied topic',
    figures: [
      { label: 'bridge p99 at 100 req/s (ms)', as: 'p99 at 100 req/s over the kept runs' },
      { label: 'bridge p99 at 1,000 req/s (ms)', as: 'p99 at 1,000 req/s' },
      { label: 'bridge p99 / floor p99 at 100 req/s, over the kept runs', as: 'p99 / Kafka-floor p99 at 100 req/s' },
      { label: 'bridge p99 / floor p99 at 1,000 req/s, over the kept runs', as: 'at 1,000 req/s' },
    ],
  },
  {
    name: 'soak',
    say: 'RSS over a 20-minute soak',
    figures: [
      { label: 'ingress RSS, per sample window', as: 'ingress' },
      { label: 'worker RSS, per sample window', as: 'worker' },
    ],
  },
];

/** A figure that each kept run records (`runs[].figures`), as a range over those runs. */
function overRuns(result: BenchResult, label: string): Figure | undefined {
  const values = (result.runs ?? []).map((run) => run.figures[label]).filter((v): v is number => typeof v === 'number');
  if (values.length === 0) return undefined;
  const unit = /\((\w+)\)$/.exec(label)?.[1] ?? '';
  return { label, unit, values };
}

/** The README's list of headline figures, between its markers. */
export function renderHeadlines(results: BenchResult[]): string {
  const lines = HEADLINES.map(({ name, say, figures }) => {
    const result = results.find((r) => r.name === name);
    if (result === undefined) throw new Error(`no bench/results/${name}.json for the README`);
    const shown = figures.map(({ label, as }) => {
      const figure = result.summary.find((f) => f.label === label) ?? overRuns(result, label);
      if (figure === undefined) throw new Error(`bench/results/${name}.json has no figure "${label}"`);
      return `${as} ${formatRange(figure)}`;
    });
    return `- ${say} (\`${result.command}\`): ${shown.join('; ')}.`;
  });
  return [HEADLINES_START, '', ...lines, '', HEADLINES_END].join('\n');
}

/** `readme` with its headline list replaced by `headlines`. */
export function withHeadlines(readme: string, headlines: string): string {
  const start = readme.indexOf(HEADLINES_START);
  const end = readme.indexOf(HEADLINES_END);
  if (start < 0 || end < start) throw new Error(`README.md has no ${HEADLINES_START} ... ${HEADLINES_END} block`);
  return readme.slice(0, start) + headlines + readme.slice(end + HEADLINES_END.length);
}

function main(argv: string[]): void {
  const results = readBenchResults(RESULTS_DIR);
  const doc = renderBenchmarksDoc(results);
  const readme = readFileSync(README, 'utf8');
  const newReadme = withHeadlines(readme, renderHeadlines(results));
  if (argv.includes('--check')) {
    if (readFileSync(BENCHMARKS_DOC, 'utf8') !== doc || readme !== newReadme) {
      console.error("docs/benchmarks.md or the README's headline figures are stale: run npm run bench:docs");
      process.exit(1);
    }
    return;
  }
  writeFileSync(BENCHMARKS_DOC, doc);
  writeFileSync(README, newReadme);
  console.log("wrote docs/benchmarks.md and the README's headline figures");
}

if (process.argv[1] && path.resolve(process.argv[1]) === import.meta.filename) main(process.argv.slice(2));
