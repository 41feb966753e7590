// npx tsx bench/soak/bookkeeping-gc.ts [requests]: what the soak's per-request bookkeeping costs its
// own process, in the two forms it has had: an object per request in a map keyed by event id (and
// one per applied record in another), or a few numbers in typed arrays indexed by sequence number
// (bench/soak/steady-load.ts, applied-log.ts). Fills each as a 20-minute soak at 500 req/s would,
// with a short-lived buffer per request as the generator's garbage, and prints per 100,000
// requests the heap used and the GC pauses (PerformanceObserver 'gc': sum and longest).
import { randomUUID } from 'node:crypto';
import { PerformanceObserver, performance } from 'node:perf_hooks';

const total = Number(process.argv[2] ?? 600_000);
const step = 100_000;
let pauses: number[] = [];
const observer = new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) pauses.push(entry.duration);
});
observer.observe({ entryTypes: ['gc'] });

async function run(form: 'maps' | 'typed arrays'): Promise<void> {
  const sent = new Map<string, { eventId: string; phase: string; due: number; status: number; answered?: number }>();
  const seen = new Map<string, { received: number; kafkaTimestamp: number; partition: number }>();
  const status = new Uint16Array(total);
  const answered = new Float64Array(total);
  const received = new Float64Array(total);
  pauses = [];
  for (let i = 0; i < total; i += 1) {
    const garbage = Buffer.alloc(1100); // a body and its answer, dropped at once
    if (form === 'maps') {
      const eventId = `evt_${randomUUID()}`;
      const entry: { eventId: string; phase: string; due: number; status: number; answered?: number } = {
        eventId,
        phase: 'soak',
        due: performance.now(),
        status: 0,
      };
      sent.set(eventId, entry);
      entry.answered = performance.now();
      entry.status = 202;
      seen.set(eventId, { received: performance.now(), kafkaTimestamp: Date.now(), partition: i % 16 });
    } else {
      answered[i] = performance.now();
      status[i] = 202;
      received[i] = performance.now();
    }
    if (garbage.length === 0) throw new Error('unreachable');
    if ((i + 1) % step === 0) {
      await new Promise((resolve) => setTimeout(resolve, 20));
      const sum = pauses.reduce((a, b) => a + b, 0);
      console.log(
        `${form}, ${(i + 1) / 1000}k requests: heap used ${(process.memoryUsage().heapUsed / 2 ** 20).toFixed(0)} MiB, GC pauses ${pauses.length}, sum ${sum.toFixed(0)} ms, longest ${Math.max(0, ...pauses).toFixed(0)} ms`,
      );
      pauses = [];
    }
  }
}

await run('maps');
await run('typed arrays');
observer.disconnect();
