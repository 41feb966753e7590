// One client, one path, in a process of its own (bench/kafka-clients/run.ts starts it), so the CPU
// and the peak RSS it reports are that client's alone. Prints one line, `RESULT <json>`.
import { summarise } from '../lib/stats.ts';
import { clientFor, type ClientName } from './clients.ts';
import { SendCoalescer, type CoalescedRecord } from './coalescer.ts';
import { appliedRecords, eventRecords, requestSizes } from './records.ts';

export type Path = 'ingress' | 'fetch' | 'relay';

export interface ChildTask {
  client: ClientName;
  path: Path;
  brokers: string[];
  topic: string;
  /** ingress, relay: measured for this long after warmUpMs. */
  durationMs: number;
  warmUpMs: number;
  /** ingress: callers each with one request of 1-50 records in flight. */
  callers: number;
  maxBatchRecords: number;
  maxBatchBytes: number;
  /** relay: records per transaction, and transactional ids (lanes). */
  transactionRecords: number;
  transactionalIds: string[];
  /** fetch: group and the number of records on the topic. */
  groupId: string;
  total: number;
  maxBytesPerPartition: number;
  /** Distinct resources in the record pool (10 records each). */
  resources: number;
}

export interface ChildResult {
  client: ClientName;
  path: Path;
  /** Records counted in the measured window, and the window in seconds. */
  records: number;
  seconds: number;
  recordsPerSecond: number;
  /** relay: transactions committed in the window. */
  transactions?: number;
  transactionsPerSecond?: number;
  /** ingress: per request, from publish() to its last record's ack, ms. */
  latencyMs?: { p50: number; p99: number; max: number; count: number };
  /** ingress: records per batch sent. */
  meanBatchRecords?: number;
  /** ingress, relay: every record acknowledged over the whole run (warm-up and tail too). */
  ackedTotal?: number;
  /** fetch: ms from the consumer's start to its first record (joining the group). */
  firstRecordMs?: number;
  cpuUsPerRecord: number;
  peakRssMb: number;
  errors: string[];
}

const cpuSeconds = (u: NodeJS.CpuUsage) => (u.user + u.system) / 1e6;
const peakRssMb = () => Math.round((process.resourceUsage().maxRSS / 1024) * 10) / 10;

async function ingress(task: ChildTask): Promise<ChildResult> {
  const pool = eventRecords(task.resources);
  const sizes = requestSizes(10_000);
  const client = clientFor(task.client, task.brokers);
  const sender = await client.idempotentSender(task.topic);
  const coalescer = new SendCoalescer({ send: (r) => sender.send(r), maxRecords: task.maxBatchRecords, maxBytes: task.maxBatchBytes });
  const errors: string[] = [];
  const latencies: number[] = [];
  let cursor = 0;
  let request = 0;
  let ackedTotal = 0;
  let windowRecords = 0;
  const started = performance.now();
  const windowStart = started + task.warmUpMs;
  const windowEnd = windowStart + task.durationMs;
  let cpuAtStart: NodeJS.CpuUsage | undefined;
  let cpuAtEnd: NodeJS.CpuUsage | undefined;
  const take = (n: number): CoalescedRecord[] => {
    const out: CoalescedRecord[] = [];
    for (let i = 0; i < n; i += 1) out.push(pool[(cursor + i) % pool.length]!);
    cursor = (cursor + n) % pool.length;
    return out;
  };
  const caller = async () => {
    while (performance.now() < windowEnd && errors.length === 0) {
      const records = take(sizes[request++ % sizes.length]!);
      const sentAt = performance.now();
      try {
        await coalescer.publish(records);
      } catch (error) {
        errors.push((error as Error).message);
        return;
      }
      const ackedAt = performance.now();
      ackedTotal += records.length;
      if (sentAt >= windowStart && ackedAt <= windowEnd) {
        latencies.push(ackedAt - sentAt);
        windowRecords += records.length;
      }
    }
  };
  const marks = [
    setTimeout(() => (cpuAtStart = process.cpuUsage()), task.warmUpMs),
    setTimeout(() => (cpuAtEnd = process.cpuUsage(cpuAtStart)), task.warmUpMs + task.durationMs),
  ];
  await Promise.all(Array.from({ length: task.callers }, caller));
  for (const m of marks) clearTimeout(m);
  await sender.close();
  const seconds = task.durationMs / 1000;
  const latency = summarise(latencies);
  const batches = coalescer.batchSizes;
  return {
    client: task.client,
    path: 'ingress',
    records: windowRecords,
    seconds,
    recordsPerSecond: windowRecords / seconds,
    latencyMs: { p50: latency.p50, p99: latency.p99, max: latency.max, count: latency.count },
    meanBatchRecords: batches.reduce((s, n) => s + n, 0) / Math.max(1, batches.length),
    ackedTotal,
    cpuUsPerRecord: cpuAtEnd === undefined ? NaN : (cpuSeconds(cpuAtEnd) * 1e6) / Math.max(1, windowRecords),
    peakRssMb: peakRssMb(),
    errors,
  };
}

async function fetch(task: ChildTask): Promise<ChildResult> {
  const client = clientFor(task.client, task.brokers);
  const started = performance.now();
  let cpuAtFirst: NodeJS.CpuUsage | undefined;
  let bytes = 0;
  let headers = 0;
  const times = await client.readAll({
    topic: task.topic,
    groupId: task.groupId,
    total: task.total,
    maxBytesPerPartition: task.maxBytesPerPartition,
    onRecord: (r) => {
      cpuAtFirst ??= process.cpuUsage();
      bytes += r.value.length + r.key.length;
      for (const name in r.headers) headers += r.headers[name]!.length;
    },
  });
  const cpu = process.cpuUsage(cpuAtFirst);
  const seconds = (times.lastAt - times.firstAt) / 1000;
  const errors = bytes > 0 && headers > 0 ? [] : ['records read without value or headers'];
  return {
    client: task.client,
    path: 'fetch',
    records: task.total,
    seconds,
    recordsPerSecond: task.total / seconds,
    firstRecordMs: times.firstAt - started,
    cpuUsPerRecord: (cpuSeconds(cpu) * 1e6) / task.total,
    peakRssMb: peakRssMb(),
    errors,
  };
}

async function relay(task: ChildTask): Promise<ChildResult> {
  const pool = appliedRecords(task.resources);
  const client = clientFor(task.client, task.brokers);
  const lanes = await client.transactionLanes(task.topic, task.transactionalIds);
  const errors: string[] = [];
  let cursor = 0;
  let ackedTotal = 0;
  let transactions = 0;
  let records = 0;
  let cpuAtStart: NodeJS.CpuUsage | undefined;
  const started = performance.now();
  const windowStart = started + task.warmUpMs;
  const windowEnd = windowStart + task.durationMs;
  let windowEndedAt = windowEnd;
  let windowOpenedAt = windowStart;
  for (;;) {
    const now = performance.now();
    if (now >= windowEnd) {
      windowEndedAt = now;
      break;
    }
    if (now >= windowStart && cpuAtStart === undefined) {
      cpuAtStart = process.cpuUsage();
      windowOpenedAt = now;
    }
    const batch: CoalescedRecord[] = [];
    for (let i = 0; i < task.transactionRecords; i += 1) batch.push(pool[(cursor + i) % pool.length]!);
    cursor = (cursor + task.transactionRecords) % pool.length;
    try {
      await lanes.send(batch);
    } catch (error) {
      errors.push((error as Error).message);
      break;
    }
    ackedTotal += batch.length;
    if (cpuAtStart !== undefined) {
      transactions += 1;
      records += batch.length;
    }
  }
  const cpu = process.cpuUsage(cpuAtStart);
  await lanes.close();
  // The window opens with the first transaction begun after the warm-up.
  const seconds = (windowEndedAt - windowOpenedAt) / 1000;
  return {
    client: task.client,
    path: 'relay',
    records,
    seconds,
    recordsPerSecond: records / seconds,
    transactions,
    transactionsPerSecond: transactions / seconds,
    ackedTotal,
    cpuUsPerRecord: (cpuSeconds(cpu) * 1e6) / Math.max(1, records),
    peakRssMb: peakRssMb(),
    errors,
  };
}

const PATHS: Record<Path, (task: ChildTask) => Promise<ChildResult>> = { ingress, fetch, relay };

const task = JSON.parse(process.argv[2]!) as ChildTask;
const result = await PATHS[task.path](task).catch((error: unknown): ChildResult => ({
  client: task.client,
  path: task.path,
  records: 0,
  seconds: NaN,
  recordsPerSecond: NaN,
  cpuUsPerRecord: NaN,
  peakRssMb: peakRssMb(),
  errors: [(error as Error).stack ?? String(error)],
}));
process.stdout.write(`RESULT ${JSON.stringify(result)}\n`);
// A client may keep sockets or timers open after close: the result is out, the process is done.
process.exit(0);
