import { describe, expect, it } from 'vitest';
import type { ApplyResult, SourceRecord } from '#domain/apply/index.ts';
import { ApplyCoalescer } from './apply-coalescer.ts';

// A stand-in applier that records each transaction it is asked for; the records are the only
// input the coalescer looks at (their count and order), so bare objects carry a label.
function record(label: string): SourceRecord {
  return { topic: 't', partition: Number(label.slice(1, 2)), offset: label, value: Buffer.from(label), headers: {} } as SourceRecord;
}
const labels = (records: readonly SourceRecord[]) => records.map((r) => r.offset);

function harness(options: { maxRecords?: number; failWhen?: (records: readonly SourceRecord[]) => boolean } = {}) {
  const transactions: string[][] = [];
  let release: (() => void) | undefined;
  let hold = false;
  const coalescer = new ApplyCoalescer({
    maxRecords: options.maxRecords ?? 100,
    applyBatch: async (records) => {
      transactions.push(labels(records));
      if (hold) await new Promise<void>((resolve) => (release = resolve));
      if (options.failWhen?.(records)) throw new Error(`failed: ${labels(records).join(',')}`);
      return records.map((r) => ({ record: r, outcome: 'applied' }) as ApplyResult);
    },
  });
  return {
    coalescer,
    transactions,
    holdNext: () => (hold = true),
    release: () => {
      hold = false;
      release?.();
    },
  };
}

const flush = () => new Promise((resolve) => setImmediate(resolve));

describe('ApplyCoalescer', () => {
  it('applies a lone chunk in a transaction of its own and returns its results in order', async () => {
    const h = harness();
    const results = await h.coalescer.apply([record('p1a'), record('p1b')]);
    expect(labels(results.map((r) => r.record))).toEqual(['p1a', 'p1b']);
    expect(h.transactions).toEqual([['p1a', 'p1b']]);
  });

  it('merges the chunks handed over in the same turn (one fetch, several partitions) into one transaction', async () => {
    const h = harness();
    const [a, b, c] = await Promise.all([
      h.coalescer.apply([record('p1a')]),
      h.coalescer.apply([record('p2a'), record('p2b')]),
      h.coalescer.apply([record('p3a')]),
    ]);
    expect(h.transactions).toEqual([['p1a', 'p2a', 'p2b', 'p3a']]);
    expect(labels(a!.map((r) => r.record))).toEqual(['p1a']);
    expect(labels(b!.map((r) => r.record))).toEqual(['p2a', 'p2b']);
    expect(labels(c!.map((r) => r.record))).toEqual(['p3a']);
  });

  it('queues chunks that arrive while a transaction runs and sends them together in the next one', async () => {
    const h = harness();
    h.holdNext();
    const first = h.coalescer.apply([record('p1a')]);
    await flush();
    expect(h.transactions).toEqual([['p1a']]);
    const later = [h.coalescer.apply([record('p2a')]), h.coalescer.apply([record('p3a')]), h.coalescer.apply([record('p4a')])];
    await flush();
    expect(h.transactions).toHaveLength(1);
    h.release();
    await Promise.all([first, ...later]);
    expect(h.transactions).toEqual([['p1a'], ['p2a', 'p3a', 'p4a']]);
  });

  it('keeps a merged transaction within maxRecords, but never splits a chunk', async () => {
    const h = harness({ maxRecords: 3 });
    await Promise.all([
      h.coalescer.apply([record('p1a'), record('p1b')]),
      h.coalescer.apply([record('p2a'), record('p2b')]),
      h.coalescer.apply([record('p3a')]),
      h.coalescer.apply([record('p4a'), record('p4b'), record('p4c'), record('p4d')]),
    ]);
    expect(h.transactions).toEqual([
      ['p1a', 'p1b'],
      ['p2a', 'p2b', 'p3a'],
      ['p4a', 'p4b', 'p4c', 'p4d'],
    ]);
  });

  it('retries a failed merged transaction chunk by chunk, so only the bad chunk fails', async () => {
    const h = harness({ failWhen: (records) => labels(records).includes('p2bad') });
    const outcomes = await Promise.allSettled([
      h.coalescer.apply([record('p1a')]),
      h.coalescer.apply([record('p2bad')]),
      h.coalescer.apply([record('p3a')]),
    ]);
    expect(outcomes.map((o) => o.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect((outcomes[1] as PromiseRejectedResult).reason).toBeInstanceOf(Error);
    expect(h.transactions).toEqual([['p1a', 'p2bad', 'p3a'], ['p1a'], ['p2bad'], ['p3a']]);
  });

  it('goes on after a failure: later chunks still get a transaction', async () => {
    const h = harness({ failWhen: (records) => labels(records).includes('p1bad') });
    await expect(h.coalescer.apply([record('p1bad')])).rejects.toThrow('failed: p1bad');
    await expect(h.coalescer.apply([record('p2a')])).resolves.toHaveLength(1);
    expect(h.transactions).toEqual([['p1bad'], ['p2a']]);
  });

  it('settles every chunk even when the transaction observer throws', async () => {
    const coalescer = new ApplyCoalescer({
      maxRecords: 10,
      applyBatch: async (records) => records.map((r) => ({ record: r, outcome: 'applied' }) as ApplyResult),
      onTransaction: () => {
        throw new Error('metric registry gone');
      },
    });
    await expect(coalescer.apply([record('p1a')])).resolves.toHaveLength(1);
    await expect(coalescer.apply([record('p2a')])).resolves.toHaveLength(1);
  });

  describe('with maxInFlight', () => {
    // Each transaction waits until the test releases it, so the order of starts is observable.
    function gated(maxInFlight: number) {
      const transactions: string[][] = [];
      const gates: Array<() => void> = [];
      let running = 0;
      let peak = 0;
      const coalescer = new ApplyCoalescer({
        maxRecords: 100,
        maxInFlight,
        applyBatch: async (records) => {
          transactions.push(labels(records));
          running += 1;
          peak = Math.max(peak, running);
          await new Promise<void>((resolve) => gates.push(resolve));
          running -= 1;
          return records.map((r) => ({ record: r, outcome: 'applied' }) as ApplyResult);
        },
      });
      return { coalescer, transactions, peak: () => peak, releaseOldest: () => gates.shift()!() };
    }

    it('starts a second transaction at once while the first runs, and queues what comes beyond the bound', async () => {
      const g = gated(2);
      const first = g.coalescer.apply([record('p1a')]);
      await flush();
      const second = g.coalescer.apply([record('p2a')]);
      await flush();
      expect(g.transactions).toEqual([['p1a'], ['p2a']]);
      const queued = [g.coalescer.apply([record('p3a')]), g.coalescer.apply([record('p4a')])];
      await flush();
      expect(g.transactions).toHaveLength(2);
      g.releaseOldest();
      await first;
      await flush();
      // The chunks that waited go together in the transaction that took the freed place.
      expect(g.transactions).toEqual([['p1a'], ['p2a'], ['p3a', 'p4a']]);
      g.releaseOldest();
      g.releaseOldest();
      await Promise.all([second, ...queued]);
      expect(g.peak()).toBe(2);
    });

    it('never runs more transactions than the bound, however many chunks arrive', async () => {
      const g = gated(3);
      const pending: Array<Promise<ApplyResult[]>> = [];
      for (let turn = 0; turn < 10; turn += 1) {
        pending.push(g.coalescer.apply([record(`p${turn % 10}${turn}`)]));
        await flush();
        if (turn % 2 === 1) g.releaseOldest();
      }
      while (g.transactions.length > 0 && pending.length > 0) {
        const settled = await Promise.race([Promise.all(pending).then(() => true), flush().then(() => false)]);
        if (settled) break;
        g.releaseOldest();
      }
      expect(g.peak()).toBe(3);
      expect(g.transactions.flat().sort()).toEqual(Array.from({ length: 10 }, (_, i) => `p${i}${i}`).sort());
    });
  });
});
