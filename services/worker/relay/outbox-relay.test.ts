import { describe, expect, it } from 'vitest';
import { createLogger } from '#plumbing/logging/logger.ts';
import type { FencedProducerUse } from '#plumbing/kafka/transaction-lanes.ts';
import { OutboxRelay } from './outbox-relay.ts';
import { RelayStateError } from './state.ts';

/**
 * A relay that never leads: its passes end at the leadership, before any read, so the loop runs
 * without a database or a broker. stopDrainMs 0: nothing to drain either.
 */
function followingRelay() {
  const calls: string[] = [];
  const producer = {
    fence: async () => {},
    use: async () => {
      throw new Error('a follower never sends');
    },
    refence: () => calls.push('refence'),
    close: async () => {
      calls.push('close');
    },
  } as unknown as FencedProducerUse;
  const relay = new OutboxRelay({
    pool: undefined as never,
    producer,
    leadership: {
      hold: async () => {
        calls.push('hold');
        return false;
      },
      confirm: async () => false,
      release: async () => {
        calls.push('release');
      },
    },
    topic: 'applied',
    batchSize: 10,
    pollMs: 60_000,
    sendTimeoutMs: 1_000,
    stopDrainMs: 0,
    logger: createLogger({ name: 'test', level: 'silent' }),
    crashPoints: { reach: () => {} } as never,
  });
  return { relay, calls };
}

/** Every pending promise of the relay's has run: its loop is in a wait, or has ended. */
const settled = () => new Promise((resolve) => setImmediate(resolve));

describe('OutboxRelay, start to stop', () => {
  it('runs from start() until stop(), and a stop ends its poll wait', async () => {
    const { relay, calls } = followingRelay();
    expect(relay.running).toBe(false);
    relay.start();
    relay.start();
    expect(relay.running).toBe(true);
    // The first pass is over and the loop waits a minute for rows: the test ends only if stop() wakes it.
    await settled();
    const stopped = relay.stop();
    expect(relay.running).toBe(false);
    expect(relay.stop()).toBe(stopped);
    await stopped;
    expect(calls).toEqual(['hold', 'release', 'close']);
  });

  it('passes again at a nudge instead of waiting for the poll', async () => {
    const { relay, calls } = followingRelay();
    relay.start();
    await settled();
    relay.nudge();
    await settled();
    await relay.stop();
    expect(calls).toEqual(['hold', 'hold', 'release', 'close']);
  });

  it('refuses a start after a stop, naming both states', async () => {
    const { relay } = followingRelay();
    relay.start();
    await relay.stop();
    expect(() => relay.start()).toThrow(RelayStateError);
    expect(() => relay.start()).toThrow("no move from 'stopped' to 'passing'");
  });

  it('stops a relay that was never started without draining', async () => {
    const { relay, calls } = followingRelay();
    await relay.stop();
    expect(calls).toEqual(['release', 'close']);
    expect(relay.running).toBe(false);
  });
});

describe('OutboxRelay, losing the lead', () => {
  // Regression: a leader that published a full batch (rows left behind: no poll wait) and then lost
  // its lead kept that flag, so its loop passed again at once, forever, never waiting for the poll
  // while another worker led; with a leadership check answered without I/O it starved every timer.
  it('waits for the poll after a pass that did not lead, even after a full batch', async () => {
    const row = (i: number) => ({
      cursor_tx: '5',
      cursor_id: '0',
      cursor_cluster: null,
      cursor_ahead: false,
      available: '10',
      id: String(i),
      tx: '10',
      event_id: `e${i}`,
      key: 'k',
      payload: Buffer.from('x'),
      source_topic: 't',
      source_partition: 0,
      source_offset: String(i),
      traceparent: null,
      tracestate: null,
    });
    const pool = {
      query: async (q: string | { text: string }) => {
        const text = typeof q === 'string' ? q : q.text;
        if (text.includes('pg_control_system')) return { rows: [{ cluster_id: null }] };
        if (text.includes('INSERT INTO applied_outbox_batches')) return { rows: [] };
        // Always a full batch: the rows left behind say "pass again at once".
        return { rows: [row(1), row(2)] };
      },
    };
    let leading = true;
    let holds = 0;
    const tx = { send: async () => {}, commit: async () => {}, abort: async () => {} };
    const producer = {
      fence: async () => {},
      use: async (fn: (p: unknown) => Promise<unknown>) => fn({ transaction: async () => tx }),
      refence: () => {},
      close: async () => {},
    } as unknown as FencedProducerUse;
    const relay = new OutboxRelay({
      pool: pool as never,
      producer,
      leadership: {
        hold: async () => {
          await settled();
          holds += 1;
          // The first pass leads and publishes a full batch; then another worker has the lead.
          const led = leading;
          leading = false;
          return led;
        },
        confirm: async () => true,
        release: async () => {},
      },
      topic: 'applied',
      batchSize: 2,
      pollMs: 60_000,
      sendTimeoutMs: 1_000,
      stopDrainMs: 0,
      logger: createLogger({ name: 'test', level: 'silent' }),
      crashPoints: { reach: () => {} } as never,
    });
    relay.start();
    for (let i = 0; i < 50; i += 1) await settled();
    // One pass that led, then one that did not; the loop then waits a minute for the poll.
    expect(holds).toBe(2);
    await relay.stop();
  });
});
