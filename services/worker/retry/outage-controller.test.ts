import { afterEach, describe, expect, it, vi } from 'vitest';
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

describe('OutageController', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('pauses once, probes with capped exponential backoff, resumes when a probe passes', async () => {
    // The probe schedule on a fake clock: exact gaps whatever the machine's speed.
    vi.useFakeTimers();
    const { controller, calls, probeTimes, registry } = setUp([false, false, false, false, true]);
    controller.trip(failure);
    controller.trip(failure);
    expect(controller.paused).toBe(true);
    expect(calls).toEqual(['pause events']);
    expect((await registry.getSingleMetric('webhook_consumer_paused')!.get()).values[0]!.value).toBe(1);
    await vi.advanceTimersByTimeAsync(20 + 40 + 80 + 80 + 80);
    expect(controller.paused).toBe(false);
    expect(calls).toEqual(['pause events', 'resume events']);
    expect(probeTimes).toHaveLength(5);
    // 20, 40, 80, 80, 80 ms apart (capped at 80).
    const gaps = probeTimes.map((t, i) => t - (probeTimes[i - 1] ?? 0));
    expect(gaps).toEqual([20, 40, 80, 80, 80]);
    expect((await registry.getSingleMetric('webhook_consumer_paused')!.get()).values[0]!.value).toBe(0);
    await controller.close();
  });

  it('stops probing on close', async () => {
    vi.useFakeTimers();
    const { controller, probeTimes } = setUp(Array(100).fill(false));
    controller.trip(failure);
    await controller.close();
    const count = probeTimes.length;
    // Past many probe intervals (20 ms doubling to 80 ms): none comes.
    await vi.advanceTimersByTimeAsync(1_000);
    expect(probeTimes.length).toBe(count);
  });
});
