// The records both clients send and read: the worker bench's dataset (the contract's theme
// snapshots, keyed by resource) with the headers the bridge puts on them, the ingress's on the
// events topic and the relay's on the applied topic.
import { createHash } from 'node:crypto';
import { encodeEventHeaders } from '#domain/contract/event-headers.ts';
import { appliedHeaders } from '#domain/apply/index.ts';
import { buildDataset } from '../worker/dataset.ts';
import type { CoalescedRecord } from './coalescer.ts';

const RECEIVED_AT = new Date('2026-11-29T00:00:00.000Z');

/** `resources` x 10 deliveries as the ingress publishes them: raw body, resource key, event headers. */
export function eventRecords(resources: number): CoalescedRecord[] {
  return buildDataset(resources).events.map((e, i) => {
    const value = Buffer.from(e.value);
    return {
      key: e.key,
      value,
      headers: encodeEventHeaders({
        eventId: `evt_bench_${i}`,
        source: 'bench',
        receivedAt: RECEIVED_AT,
        secretId: 'whsec_bench',
        bodySha256: createHash('sha256').update(value).digest('base64'),
        eventType: 'theme.updated',
      }),
    };
  });
}

/** The same events as the relay publishes them to the applied topic. */
export function appliedRecords(resources: number): CoalescedRecord[] {
  return buildDataset(resources).events.map((e, i) => ({
    key: e.key,
    value: Buffer.from(e.value),
    headers: appliedHeaders({
      eventId: `evt_bench_${i}`,
      topic: 'bridge.events',
      partition: i % 12,
      offset: String(i),
      key: e.key,
      payload: e.value,
    }),
  }));
}

/** Sizes of the ingress's requests: 1-50 records each, from a seeded generator. */
export function requestSizes(count: number, seed = 11): number[] {
  let state = seed;
  const sizes: number[] = [];
  for (let i = 0; i < count; i += 1) {
    state = (state * 1_103_515_245 + 12_345) % 2 ** 31;
    sizes.push(1 + Math.floor((state / 2 ** 31) * 50));
  }
  return sizes;
}
