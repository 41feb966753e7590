import { describe, expect, it } from 'vitest';
import type { Producer } from 'kafkajs';
import { TransactionLanes, type Lane } from './transaction-lanes.ts';

/** A lane as RecoveringProducer behaves: a new producer (generation) after a failure or replace(). */
function lane(name: string, events: string[]) {
  let generation = 0;
  let current: string | undefined;
  const state = { failUse: false };
  const producer = () => (current ??= `${name}#${(generation += 1)}`);
  const l: Lane = {
    async connect() {
      producer();
    },
    async use<T>(work: (p: Producer) => Promise<T>): Promise<T> {
      const p = producer();
      if (state.failUse) {
        state.failUse = false;
        current = undefined;
        events.push(`${p}: failed`);
        throw new Error(`${name} failed`);
      }
      return work({ name: p } as unknown as Producer);
    },
    replace() {
      if (current !== undefined) events.push(`${current}: replaced`);
      current = undefined;
    },
    async close() {},
  };
  return { lane: l, state };
}

function setup() {
  const events: string[] = [];
  const a = lane('a', events);
  const b = lane('b', events);
  const name = (p: Producer) => (p as unknown as { name: string }).name;
  const lanes = new TransactionLanes([a.lane, b.lane], async (p) => {
    events.push(`${name(p)}: initialised`);
  });
  const send = () =>
    lanes.use(
      async (p) => {
        events.push(`${name(p)}: sent`);
      },
      1_000,
      'relay_send_timeout',
      'test',
    );
  return { events, a, b, lanes, send };
}

describe('TransactionLanes', () => {
  it('fences on demand: fence() initialises every lane once, refence() makes the next fence start over with new producers', async () => {
    const { events, lanes, send } = setup();
    await lanes.fence(1_000, 'relay_send_timeout', 'test');
    await lanes.fence(1_000, 'relay_send_timeout', 'test');
    await send();
    lanes.refence('leadership acquired');
    await lanes.fence(1_000, 'relay_send_timeout', 'test');
    await send();
    expect(events).toEqual([
      'a#1: initialised',
      'b#1: initialised',
      'a#1: sent',
      'a#1: replaced',
      'b#1: replaced',
      'a#2: initialised',
      'b#2: initialised',
      'b#2: sent',
    ]);
  });

  it('initialises every lane before the first send, then takes the lanes in turn', async () => {
    const { events, send } = setup();
    for (let i = 0; i < 4; i += 1) await send();
    expect(events).toEqual(['a#1: initialised', 'b#1: initialised', 'a#1: sent', 'b#1: sent', 'a#1: sent', 'b#1: sent']);
  });

  it('after a failure replaces every lane and initialises them all again before the same lane retries', async () => {
    const { events, b, send } = setup();
    await send(); // a
    b.state.failUse = true;
    await expect(send()).rejects.toThrow('b failed');
    await send(); // b again, after both were initialised anew
    await send(); // a
    expect(events).toEqual([
      'a#1: initialised',
      'b#1: initialised',
      'a#1: sent',
      'b#1: failed',
      'a#1: replaced',
      'a#2: initialised',
      'b#2: initialised',
      'b#2: sent',
      'a#2: sent',
    ]);
  });

  it('sends nothing when a lane cannot be initialised, and initialises every lane on the next use', async () => {
    const { events, b, send } = setup();
    b.state.failUse = true;
    await expect(send()).rejects.toThrow('b failed');
    expect(events.filter((e) => e.endsWith('sent'))).toEqual([]);
    await send();
    expect(events).toEqual(['a#1: initialised', 'b#1: failed', 'a#1: replaced', 'a#2: initialised', 'b#2: initialised', 'a#2: sent']);
  });
});
