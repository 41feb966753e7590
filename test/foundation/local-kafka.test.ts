import { afterAll, describe, expect, it } from 'vitest';
import { brokerReady } from '#plumbing/kafka/client.ts';
import { LocalKafka } from '../../infra/provision/kafka/local-kafka.ts';
import { freePortRange } from '../kit/ports.ts';

const basePort = await freePortRange(2);

describe('local Kafka lifecycle', () => {
  const options = { name: `lifecycle-${process.pid}`, nodes: 1 as const, basePort };
  const first = new LocalKafka(options);
  afterAll(async () => {
    await first.stop();
    first.wipe();
  });

  it('reuses a running broker and stops only what it started', async () => {
    first.wipe();
    expect(await first.start()).toEqual({ started: [1], reused: [] });

    // A second start (another `npm start`, another test run) finds it running and reuses it.
    const second = new LocalKafka(options);
    expect(await second.start()).toEqual({ started: [], reused: [1] });
    await second.stop();
    expect(await brokerReady(first.brokers)).toBe(true);

    await first.stop();
    expect(await brokerReady(first.brokers)).toBe(false);
  });
});
