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
