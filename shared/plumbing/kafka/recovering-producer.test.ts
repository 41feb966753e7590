import { describe, expect, it } from 'vitest';
import type { Producer } from 'kafkajs';
import { createLogger } from '#plumbing/logging/logger.ts';
import { RecoveringProducer } from './recovering-producer.ts';

/** Producers that only connect and disconnect, each named by its generation. */
function setup() {
  let generation = 0;
  const producer = new RecoveringProducer({
    name: 'test',
    logger: createLogger({ name: 'recovering-producer-test', level: 'silent' }),
    connectTimeoutMs: 1_000,
    create: () => {
      generation += 1;
      return { name: `p${generation}`, connect: async () => {}, disconnect: async () => {} } as unknown as Producer;
    },
  });
  const name = (p: Producer) => (p as unknown as { name: string }).name;
  return { producer, name };
}

function gate() {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { open, opened };
}

describe('RecoveringProducer: one use in flight', () => {
  it('starts a use only after the previous one has finished, in call order', async () => {
    const { producer, name } = setup();
    const events: string[] = [];
    const first = gate();
    const one = producer.use(
      async (p) => {
        events.push(`one starts on ${name(p)}`);
        await first.opened;
        events.push('one ends');
      },
      10_000,
      'failure_produce_timeout',
      'one',
    );
    const two = producer.use(async (p) => void events.push(`two starts on ${name(p)}`), 10_000, 'failure_produce_timeout', 'two');
    const three = producer.use(async (p) => void events.push(`three starts on ${name(p)}`), 10_000, 'failure_produce_timeout', 'three');
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(events).toEqual(['one starts on p1']);
    first.open();
    await Promise.all([one, two, three]);
    expect(events).toEqual(['one starts on p1', 'one ends', 'two starts on p1', 'three starts on p1']);
  });

  it('replaces a producer whose use failed before the next use starts', async () => {
    const { producer, name } = setup();
    const used: string[] = [];
    const failing = producer.use(
      async (p) => {
        used.push(name(p));
        await new Promise((resolve) => setTimeout(resolve, 10));
        throw new Error('request timed out');
      },
      10_000,
      'failure_produce_timeout',
      'failing',
    );
    const next = producer.use(async (p) => void used.push(name(p)), 10_000, 'failure_produce_timeout', 'next');
    await expect(failing).rejects.toThrow('request timed out');
    await next;
    expect(used).toEqual(['p1', 'p2']);
    expect(producer.replacements).toBe(1);
  });

  it('a use whose time runs out while it waits sends nothing and keeps the order of the rest', async () => {
    const { producer, name } = setup();
    const events: string[] = [];
    const first = gate();
    const one = producer.use(
      async () => {
        await first.opened;
        events.push('one ends');
      },
      10_000,
      'failure_produce_timeout',
      'one',
    );
    const impatient = producer.use(async () => void events.push('impatient sent'), 20, 'failure_produce_timeout', 'impatient');
    const patient = producer.use(
      async (p) => void events.push(`patient starts on ${name(p)}`),
      10_000,
      'failure_produce_timeout',
      'patient',
    );
    await expect(impatient).rejects.toMatchObject({ code: 'failure_produce_timeout' });
    // The impatient use gave up, but the patient one still waits for the use in flight.
    expect(events).toEqual([]);
    first.open();
    await Promise.all([one, patient]);
    // Nothing failed on the producer itself: it is kept.
    expect(events).toEqual(['one ends', 'patient starts on p1']);
    expect(producer.replacements).toBe(0);
  });
});
