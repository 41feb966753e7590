import type { EachBatchPayload } from '#plumbing/kafka/types.ts';
import { Registry } from 'prom-client';
import { describe, expect, it, vi } from 'vitest';
import type { ApplyResult, SnapshotApplier } from '#domain/apply/index.ts';
import { createLogger } from '#plumbing/logging/logger.ts';
import { coalescedCommits, createBatchHandler } from './batch-handler.ts';
import { createCrashPoints } from '../crash-points.ts';
import { createWorkerMetrics } from '../metrics.ts';

describe('coalescedCommits', () => {
  it('sends one commit for the callers that arrive while another is in flight, with what they resolved by then', async () => {
    const share = coalescedCommits();
    const sent: number[][] = [];
    let resolved = [1];
    const releases: Array<() => void> = [];
    const commit = () =>
      new Promise<void>((resolve) => {
        sent.push([...resolved]);
        releases.push(resolve);
      });
    const first = share(commit);
    resolved = [1, 2];
    const second = share(commit);
    resolved = [1, 2, 3];
    const third = share(commit);
    expect(sent).toEqual([[1]]);
    releases[0]!();
    await first;
    await new Promise((r) => setImmediate(r));
    // One more request for both waiting callers, carrying every offset resolved before it was sent.
    expect(sent).toEqual([[1], [1, 2, 3]]);
    releases[1]!();
    await Promise.all([second, third]);
    expect(sent).toHaveLength(2);
  });

  it('settles only after the commit in flight and the one waiting behind it have ended (what the worker awaits before leaving the group)', async () => {
    const share = coalescedCommits();
    const releases: Array<() => void> = [];
    const commit = () => new Promise<void>((resolve) => releases.push(resolve));
    void share(commit);
    void share(commit);
    let settled = false;
    const settling = share.settled().then(() => (settled = true));
    await new Promise((r) => setImmediate(r));
    expect(settled).toBe(false);
    releases[0]!();
    await new Promise((r) => setImmediate(r));
    expect(settled).toBe(false);
    releases[1]!();
    await settling;
    expect(settled).toBe(true);
    // Nothing in flight: settled at once.
    await share.settled();
  });

  it('passes a failed commit to every caller waiting on it, and the next caller starts afresh', async () => {
    const share = coalescedCommits();
    let calls = 0;
    const failing = () => {
      calls += 1;
      return Promise.reject(new Error('coordinator moved'));
    };
    await expect(share(failing)).rejects.toThrow('coordinator moved');
    await expect(share(() => Promise.resolve())).resolves.toBeUndefined();
    expect(calls).toBe(1);
  });
  it('with minIntervalMs, a commit asked for within the interval waits out the rest of it, shared by everyone who asks meanwhile', async () => {
    // The interval on a fake clock (its timer and performance.now()): exact whatever the machine's speed.
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
    try {
      const share = coalescedCommits({ minIntervalMs: 60 });
      const startedAt: number[] = [];
      const commit = () => {
        startedAt.push(performance.now());
        return Promise.resolve();
      };
      const t0 = performance.now();
      await share(commit);
      expect(startedAt).toHaveLength(1);
      // Asked for right after the first ended: it waits until 60 ms after the first began.
      const second = share(commit);
      const third = share(commit);
      expect(third).toBe(second);
      await vi.advanceTimersByTimeAsync(59);
      expect(startedAt).toHaveLength(1);
      await vi.advanceTimersByTimeAsync(1);
      await Promise.all([second, third]);
      expect(startedAt).toHaveLength(2);
      expect(startedAt[1]! - t0).toBe(60);
      // Asked for after the interval has passed: sent at once.
      await vi.advanceTimersByTimeAsync(70);
      void share(commit);
      expect(startedAt).toHaveLength(3);
      await share.settled();
    } finally {
      vi.useRealTimers();
    }
  });

  it('with minIntervalMs, settled() waits for a commit that is waiting out its interval', async () => {
    const share = coalescedCommits({ minIntervalMs: 40 });
    let commits = 0;
    const commit = () => {
      commits += 1;
      return Promise.resolve();
    };
    await share(commit);
    void share(commit);
    await share.settled();
    expect(commits).toBe(2);
  });
});

/** What kafkajs rejects with for a broker's error code (a KafkaJSProtocolError: its `type` names the code). */
function protocolError(type: string, code: number): Error {
  return Object.assign(new Error(`broker answered ${type}`), { name: 'KafkaJSProtocolError', type, code });
}

describe('createBatchHandler offset commits', () => {
  // A fake eachBatch payload: the handler's only Kafka contact is through these functions.
  function setup(running: { value: boolean }, stopping?: () => boolean, joins?: () => number) {
    const registry = new Registry();
    const metrics = createWorkerMetrics(registry, async () => 0);
    const commits: Array<{ offsets: string[]; release: () => void; refuse: (error: Error) => void }> = [];
    const waiting: Array<{ count: number; resolve: () => void }> = [];
    /** Resolves once `count` OffsetCommit requests have been sent. */
    const committed = (count: number) =>
      new Promise<void>((resolve) => (commits.length >= count ? resolve() : waiting.push({ count, resolve })));
    const resolved: string[] = [];
    const applied: string[] = [];
    const handler = createBatchHandler({
      applier: {} as SnapshotApplier,
      applyChunk: async (chunk) => {
        applied.push(...chunk.map((record) => record.offset));
        return chunk.map((record) => ({ record, outcome: 'applied' }) as ApplyResult);
      },
      batchSize: 1000,
      logger: createLogger({ name: 'test', level: 'silent' }),
      metrics,
      crashPoints: createCrashPoints(undefined, 1),
      onFailure: async () => 'handled',
      ...(stopping ? { stopping } : {}),
      ...(joins ? { joins } : {}),
    });
    const payload = (offsets: string[]) =>
      ({
        batch: {
          topic: 't',
          partition: 0,
          highWatermark: '100',
          messages: offsets.map((offset) => ({ offset, key: null, value: Buffer.from('{}'), timestamp: '0', headers: {} })),
        },
        resolveOffset: (offset: string) => resolved.push(offset),
        heartbeat: async () => {},
        uncommittedOffsets: () => ({ topics: [{ topic: 't', partitions: [{ partition: '0', offset: resolved.at(-1)! }] }] }),
        commitOffsetsIfNecessary: () =>
          new Promise<void>((release, refuse) => {
            commits.push({ offsets: [...resolved], release: () => release(), refuse });
            for (const w of waiting.filter((w) => commits.length >= w.count)) w.resolve();
          }),
        isRunning: () => running.value,
        isStale: () => false,
        pause: () => () => {},
      }) as unknown as EachBatchPayload;
    return { handler, payload, commits, committed, applied };
  }

  it('returns before the OffsetCommit round trip while the consumer runs (the next fetch does not wait for it)', async () => {
    const { handler, payload, commits } = setup({ value: true });
    await handler(payload(['1', '2']));
    expect(commits).toHaveLength(1);
    expect(commits[0]!.offsets).toEqual(['1', '2']);
    commits[0]!.release();
  });

  it('waits for the commit when the consumer is stopping, so what was applied is committed before it leaves', async () => {
    // Running when the chunk starts, stopping (consumer.disconnect) by the time it is applied.
    const running = { value: true };
    const { handler, payload, commits, committed } = setup(running);
    let done = false;
    const handled = handler(payload(['1', '2'])).then(() => (done = true));
    running.value = false;
    // The chunk's background commit, then the one the stopping consumer waits for.
    await committed(1);
    expect(commits[0]!.offsets).toEqual(['1', '2']);
    expect(done).toBe(false);
    commits[0]!.release();
    await committed(2);
    expect(commits[1]!.offsets).toEqual(['1', '2']);
    expect(done).toBe(false);
    commits[1]!.release();
    await handled;
    expect(done).toBe(true);
    expect(commits).toHaveLength(2);
  });

  it('waits for the commit when the worker is stopping though the consumer still runs (its close awaits commits before disconnecting)', async () => {
    // worker.close() waits for the commits it sees, then disconnects: a batch that ends in between
    // must not leave its commit in the background, where it would land after the consumer left.
    const worker = { stopping: true };
    const { handler, payload, commits, committed } = setup({ value: true }, () => worker.stopping);
    let done = false;
    const handled = handler(payload(['1', '2'])).then(() => (done = true));
    await committed(1);
    expect(done).toBe(false);
    commits[0]!.release();
    await committed(2);
    expect(commits[1]!.offsets).toEqual(['1', '2']);
    expect(done).toBe(false);
    commits[1]!.release();
    await handled;
    expect(done).toBe(true);
    expect(commits).toHaveLength(2);
  });

  // A group member whose commits the group refuses must re-join (kafkajs does when a commit throws
  // in its own loop); applied on in the background, it would never commit again.
  it.each([
    ['NOT_COORDINATOR_FOR_GROUP', 16],
    ['ILLEGAL_GENERATION', 22],
    ['UNKNOWN_MEMBER_ID', 25],
    ['REBALANCE_IN_PROGRESS', 27],
  ])('a background commit the group refuses with %s fails the next batch before it applies anything', async (type, code) => {
    const { handler, payload, commits, committed, applied } = setup({ value: true });
    await handler(payload(['1']));
    await committed(1);
    commits[0]!.refuse(protocolError(type, code));
    await new Promise((r) => setImmediate(r));
    await expect(handler(payload(['2']))).rejects.toMatchObject({ type });
    expect(applied).toEqual(['1']);
    // Raised once: the batch fetched after the re-join applies.
    await handler(payload(['2']));
    expect(applied).toEqual(['1', '2']);
  });

  it('a refusal of a commit asked for before the member re-joined is forgotten: the new membership applies on', async () => {
    // kafkajs re-joins by itself too (a heartbeat refused); a commit of the old membership that
    // fails after that must not make the new one leave the group again.
    const group = { joins: 1 };
    const { handler, payload, commits, committed, applied } = setup({ value: true }, undefined, () => group.joins);
    await handler(payload(['1']));
    await committed(1);
    group.joins += 1;
    commits[0]!.refuse(protocolError('ILLEGAL_GENERATION', 22));
    await new Promise((r) => setImmediate(r));
    await handler(payload(['2']));
    // Refused before the re-join, raised after it: forgotten as well.
    await committed(2);
    commits[1]!.refuse(protocolError('REBALANCE_IN_PROGRESS', 27));
    await new Promise((r) => setImmediate(r));
    group.joins += 1;
    await handler(payload(['3']));
    expect(applied).toEqual(['1', '2', '3']);
  });

  it('a background commit that fails for another reason (a broker unreachable) is carried by the next one, the batches go on', async () => {
    const { handler, payload, commits, committed, applied } = setup({ value: true });
    await handler(payload(['1']));
    await committed(1);
    commits[0]!.refuse(protocolError('REQUEST_TIMED_OUT', 7));
    await new Promise((r) => setImmediate(r));
    await handler(payload(['2']));
    expect(applied).toEqual(['1', '2']);
    await committed(2);
    expect(commits[1]!.offsets).toEqual(['1', '2']);
  });
});
