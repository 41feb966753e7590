import { describe, expect, it } from 'vitest';
import { LocalKafka } from '../kit/infra.ts';
import { testKafka, readTopic, useLocalKafka } from '../kit/kafka.ts';
import { uniqueName } from '../kit/names.ts';
import { post, readyz, signedRequest, useIngress } from '../kit/ingress.ts';
import { eventually } from '../kit/eventually.ts';
import { freePortRange } from '../kit/ports.ts';

const basePort = await freePortRange(2);

// A broker of the test's own (never the shared one) is stopped and started under a live ingress.
describe('ingress during a broker outage', () => {
  const cluster = new LocalKafka({ name: `ingress-outage-${process.pid}`, nodes: 1, basePort });
  useLocalKafka(cluster, { startTimeoutMs: 120_000, timeoutMs: 180_000 });
  const {
    kafka,
    names: { events: topic },
    ingress,
  } = useIngress({
    cluster: { brokers: cluster.brokers, kafka: testKafka(uniqueName('outage'), cluster.brokers) },
    topics: { eventsPartitions: 3, retryLevels: 0 },
    config: { ackTimeoutMs: 2000, probeIntervalMs: 250 },
    timeoutMs: 180_000,
  });
  const acked = new Set<string>();
  const refused = new Set<string>();

  async function sendSome(count: number): Promise<number[]> {
    const statuses: number[] = [];
    for (let i = 0; i < count; i += 1) {
      const request = signedRequest({ event: { resource: { id: `theme_${i % 4}` } } });
      const answer = await post(ingress.url, request);
      statuses.push(answer.status);
      if (answer.status === 202) acked.add(request.eventId);
      else {
        refused.add(request.eventId);
        expect(answer.status).toBe(503);
        expect(answer.headers['retry-after']).toBe('5');
      }
    }
    return statuses;
  }

  it('answers 503 (never 2xx) while the broker is down and 202 again once it is back', async () => {
    expect(await sendSome(10)).toEqual(Array(10).fill(202));
    expect(await readyz(ingress)).toBe(200);

    await cluster.stopNode(1);
    // Whatever the producer was doing when the broker went away: never a 2xx from here on.
    const during = await sendSome(10);
    expect(during).toEqual(Array(10).fill(503));
    await eventually(async () => (await readyz(ingress)) === 503, { timeoutMs: 10_000, message: 'readiness to turn false' });

    // Once the outage is known, refusals come at once instead of after the 2 s ack timeout.
    for (let i = 0; i < 20; i += 1) {
      const started = performance.now();
      expect(await sendSome(1)).toEqual([503]);
      // Half the ack timeout: a liveness bound far above an immediate refusal.
      expect(performance.now() - started).toBeLessThan(1_000);
    }

    await cluster.startNode(1);
    await eventually(async () => (await readyz(ingress)) === 200, { timeoutMs: 60_000, message: 'readiness to turn true' });
    await eventually(async () => (await sendSome(1))[0] === 202, { timeoutMs: 30_000, message: 'a 202 after the restart' });
    expect(await sendSome(10)).toEqual(Array(10).fill(202));

    // Every 2xx is on the topic; anything else on it was answered 503 (the provider retries it).
    const records = await readTopic(kafka, topic);
    const ids = new Set(records.map((r) => r.headers['event-id']!));
    for (const id of acked) expect(ids.has(id)).toBe(true);
    for (const id of ids) expect(acked.has(id) || refused.has(id)).toBe(true);
    expect(records.filter((r) => acked.has(r.headers['event-id']!)).length).toBe(acked.size);
  });
});
