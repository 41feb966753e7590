import { describe, expect, it } from 'vitest';
import { SendCoalescer, type CoalescedRecord } from './coalescer.ts';

const record = (key: string, bytes = 10): CoalescedRecord => ({ key, value: Buffer.alloc(bytes), headers: {} });
const records = (prefix: string, n: number, bytes?: number) => Array.from({ length: n }, (_, i) => record(`${prefix}${i}`, bytes));

/** A send that resolves when told to, recording every batch. */
function manualSend() {
  const batches: string[][] = [];
  const pending: Array<{ resolve: () => void; reject: (e: unknown) => void }> = [];
  return {
    batches,
    pending,
    send: (r: CoalescedRecord[]) => {
      batches.push(r.map((x) => x.key));
      return new Promise<void>((resolve, reject) => pending.push({ resolve, reject }));
    },
  };
}

const turn = () => new Promise((resolve) => setImmediate(resolve));

describe('SendCoalescer', () => {
  it('sends the requests of one turn of the event loop as one batch', async () => {
    const s = manualSend();
    const c = new SendCoalescer({ send: s.send, maxRecords: 500, maxBytes: 1 << 20 });
    const a = c.publish(records('a', 2));
    const b = c.publish(records('b', 3));
    await turn();
    expect(s.batches).toEqual([['a0', 'a1', 'b0', 'b1', 'b2']]);
    s.pending[0]!.resolve();
    await expect(Promise.all([a, b])).resolves.toEqual([undefined, undefined]);
  });

  it('keeps one batch in flight and sends what queued meanwhile once it is acked', async () => {
    const s = manualSend();
    const c = new SendCoalescer({ send: s.send, maxRecords: 500, maxBytes: 1 << 20 });
    void c.publish(records('a', 1));
    await turn();
    const later = c.publish(records('b', 1));
    const last = c.publish(records('c', 1));
    await turn();
    expect(s.batches).toHaveLength(1);
    s.pending[0]!.resolve();
    await turn();
    expect(s.batches).toEqual([['a0'], ['b0', 'c0']]);
    s.pending[1]!.resolve();
    await expect(Promise.all([later, last])).resolves.toBeDefined();
  });

  it('splits a request across batches at maxRecords and resolves it after its last batch', async () => {
    const s = manualSend();
    const c = new SendCoalescer({ send: s.send, maxRecords: 4, maxBytes: 1 << 20 });
    let settled = false;
    const big = c.publish(records('a', 6)).then(() => (settled = true));
    await turn();
    expect(s.batches).toEqual([['a0', 'a1', 'a2', 'a3']]);
    s.pending[0]!.resolve();
    await turn();
    expect(settled).toBe(false);
    expect(s.batches[1]).toEqual(['a4', 'a5']);
    s.pending[1]!.resolve();
    await big;
    expect(settled).toBe(true);
  });

  it('closes a batch at maxBytes but sends a record larger than a batch alone', async () => {
    const s = manualSend();
    const c = new SendCoalescer({ send: s.send, maxRecords: 500, maxBytes: 300 });
    void c.publish([record('a', 150), record('b', 150), record('huge', 1000), record('c', 10)]);
    for (let i = 0; i < 4; i += 1) {
      await turn();
      s.pending[i]?.resolve();
    }
    await turn();
    expect(s.batches).toEqual([['a'], ['b'], ['huge'], ['c']]);
  });

  it('rejects every request of a failed batch, once, and carries on with the next', async () => {
    const s = manualSend();
    const c = new SendCoalescer({ send: s.send, maxRecords: 2, maxBytes: 1 << 20 });
    const spanning = c.publish(records('a', 3));
    const other = c.publish(records('b', 1));
    await turn();
    s.pending[0]!.reject(new Error('broker down'));
    await expect(spanning).rejects.toThrow('broker down');
    await turn();
    // The rest of the failed request is dropped; the next request still goes.
    expect(s.batches[1]).toEqual(['b0']);
    s.pending[1]!.resolve();
    await expect(other).resolves.toBeUndefined();
  });
});
