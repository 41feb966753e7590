import { describe, expect, it } from 'vitest';
import { Registry } from 'prom-client';
import { createFailureMetrics } from '#domain/failures/index.ts';
import { createLogger } from '#plumbing/logging/logger.ts';
import { OutageController } from './outage-controller.ts';

const failure = { class: 'outage' as const, code: 'db_unavailable' as const, message: 'connect ECONNREFUSED' };

function setUp(probeResults: boolean[]) {
  const calls: string[] = [];
  const probeTimes: number[] = [];
  const registry = new Registry();
  const metrics = createFailureMetrics(registry);
  const started = Date.now();
  const controller = new OutageController({
    name: 'main',
    consumer: {
      pause: (topics) => calls.push(`pause ${topics.map((t) => t.topic).join(',')}`),
      resume: (topics) => calls.push(`resume ${topics.map((t) => t.topic).join(',')}`),
    },
    topics: ['events'],
    probe: async () => {
      probeTimes.push(Date.now() - started);
      return probeResults.shift() ?? true;
    },
    probeInitialMs: 20,
    probeMaxMs: 80,
    metrics,
    logger: createLogger({ name: 'test', level: 'silent' }),
  });
  return { controller, calls, probeTimes, registry };
}

async function until(condition: () => boolean, timeoutMs = 3000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('condition not met');
    await new Promise((r) => setTimeout(r, 5));
  }
}

describe('OutageController', () => {
  it('pauses once, probes with capped exponential backoff, resumes when a probe passes', async () => {
    const { controller, calls, probeTimes, registry } = setUp([false, false, false, false, true]);
    controller.trip(failure);
    controller.trip(failure);
    expect(controller.paused).toBe(true);
    expect(calls).toEqual(['pause events']);
    expect((await registry.getSingleMetric('webhook_consumer_paused')!.get()).values[0]!.value).toBe(1);
    await until(() => !controller.paused);
    expect(calls).toEqual(['pause events', 'resume events']);
    expect(probeTimes).toHaveLength(5);
    // 20, 40, 80, 80, 80 ms apart (capped at 80).
    const gaps = probeTimes.map((t, i) => t - (probeTimes[i - 1] ?? 0));
    expect(gaps[0]).toBeGreaterThanOrEqual(18);
    expect(gaps[1]).toBeGreaterThanOrEqual(38);
    expect(gaps[3]).toBeGreaterThanOrEqual(78);
    expect(gaps[4]).toBeLessThan(160);
    expect((await registry.getSingleMetric('webhook_consumer_paused')!.get()).values[0]!.value).toBe(0);
    await controller.close();
  });

  it('stops probing on close', async () => {
    const { controller, probeTimes } = setUp(Array(100).fill(false));
    controller.trip(failure);
    await controller.close();
    const count = probeTimes.length;
    await new Promise((r) => setTimeout(r, 100));
    expect(probeTimes.length).toBe(count);
  });
});
