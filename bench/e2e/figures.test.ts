import { describe, expect, it } from 'vitest';
import { comparisons, eventsCsv, floorStagesOf, foreignRecords, runFigures, stagesOf, totalsOf, worstAckWindow } from './figures.ts';
import type { Sent } from './load.ts';
import type { AppliedSeen, AppliedWatch, CommitWatch } from './observe.ts';
import type { FloorPhase, Phase } from './phases.ts';

const noop = async () => {};

function phase(name: string, rate: number, sent: Sent[]): Phase {
  return {
    name,
    rate,
    load: { sent, started: 0, ended: 0, sendLagP99Ms: 0, sendLagMaxMs: 0 },
    drainedMs: 0,
    drainedAll: true,
    cpu: { ingress: 0, worker: 0, postgres: 0, kafka: 0, bench: 0, machine: 0, steal: 0, seconds: 1 },
    otherRuns: [],
    rssMb: { ingress: 0, worker: 0 },
    benchLoopDelay: { p99: 0, max: 0 },
  };
}

const record = (received: number, kafkaTimestamp: number): AppliedSeen => ({ received, kafkaTimestamp, partition: 0 });

// Four answers: applied (with its commit seen), 2xx but stale in the worker's inbox, 2xx and lost, and a 503.
const sent: Sent[] = [
  { eventId: 'a', phase: '100 req/s', due: 0, answered: 10, status: 202 },
  { eventId: 'stale', phase: '100 req/s', due: 5, answered: 12, status: 202 },
  { eventId: 'lost', phase: '100 req/s', due: 6, answered: 13, status: 202 },
  { eventId: 'busy', phase: '100 req/s', due: 7, answered: 9, status: 503 },
];
const applied: AppliedWatch = {
  seen: new Map([
    ['a', record(100, 60)],
    ['not-ours', record(110, 70)],
  ]),
  duplicates: 0,
  unlabelled: 0,
  stop: noop,
};
const commits: CommitWatch = { seen: new Map([['a', { observed: 40, transactionStart: 30 }]]), polls: 0, slowestPollMs: 0, stop: noop };
const observed = { applied, commits, notApplied: new Map([['stale', 'stale']]) };

describe('the e2e figures', () => {
  it('time each stage of an applied event and keep the ledger of every answer', () => {
    const { stages, ledger } = stagesOf(phase('100 req/s', 100, sent), observed);
    expect(ledger).toEqual({
      sent: 4,
      accepted: 3,
      other: { '503': 1 },
      applied: 1,
      lost: 1,
      notApplied: { stale: 1 },
      extra: 0,
      commitsSeen: 1,
    });
    expect(stages.total.p50).toBe(100); // due 0 -> received 100
    expect(stages.ack.p50).toBe(10);
    expect(stages.ackToCommit.p50).toBe(30);
    expect(stages.ackToTxStart.p50).toBe(20);
    expect(stages.commitToPublished.p50).toBe(60);
    expect(stages.commitToSend.p50).toBe(20);
    expect(stages.sendToReceived.p50).toBe(40);
    expect(stages.ackToSend.p50).toBe(50);
  });

  it('add the ledgers up over the phases and count the records this run did not send', () => {
    const measured = [stagesOf(phase('warm-up', 10, sent), observed), stagesOf(phase('100 req/s', 100, sent), observed)];
    expect(totalsOf(measured)).toEqual({ accepted: 6, applied: 2, lost: 2, notApplied: 2, extra: 0, other: 2 });
    expect(foreignRecords([phase('100 req/s', 100, sent)], applied)).toBe(1);
  });

  it('set the bridge against the floor at the rates both ran, and keep the ratio per run', () => {
    const floor: FloorPhase = {
      result: {
        name: 'floor 100 req/s',
        rate: 100,
        sent: [
          { id: 'f1', due: 0, acked: 5 },
          { id: 'f2', due: 1 },
        ],
        seen: new Map([['f1', record(50, 20)]]),
        duplicates: 0,
        started: 0,
        sendLagP99Ms: 0,
        drainedAll: true,
        drainedMs: 0,
        topics: [],
      },
      cpu: { bench: 0, relay: 0, machine: 0, kafka: 0, seconds: 1 },
      otherRuns: [],
    };
    const measuredFloor = floorStagesOf(floor);
    expect(measuredFloor.ledger).toEqual({ sent: 2, acked: 1, received: 1, lost: 0, errors: 1 });
    const bridge = stagesOf(phase('100 req/s', 100, sent), observed);
    const [compared, ...others] = comparisons([bridge, stagesOf(phase('500 req/s', 500, sent), observed)], [measuredFloor]);
    expect(others).toEqual([]);
    expect(compared).toMatchObject({ rate: 100, bridge: { p99: 100 }, floor: { p99: 50 }, ratioP99: 2 });
    expect(runFigures([compared!])).toEqual({
      'bridge p99 at 100 req/s (ms)': 100,
      'floor p99 at 100 req/s (ms)': 50,
      'bridge p99 / floor p99 at 100 req/s': 2,
    });
  });

  it('write one CSV line per answer, with the times each watcher saw', () => {
    const lines = eventsCsv([phase('100 req/s', 100, sent)], observed)
      .trimEnd()
      .split('\n');
    expect(lines).toHaveLength(5);
    expect(lines[1]).toBe('"100 req/s",a,202,0,10,30,40,60,100,,,,');
    expect(lines[4]).toBe('"100 req/s",busy,503,7,9,,,,,,,,');
  });

  it('find the window of the slowest answer, with what its requests saw', () => {
    // 1,000 req/s for 0.5 s: every answer 5 ms after its due time, except a stall of the requests
    // due from 300 to 340 ms (answered at 420 ms), two of them reset and one on a new connection.
    const load: Sent[] = Array.from({ length: 500 }, (_, i) => ({
      eventId: `e${i}`,
      phase: '1000 req/s',
      due: 1000 + i,
      answered: 1005 + i,
      status: 202,
      reusedSocket: true,
      written: 1000.5 + i,
    }));
    for (let i = 300; i <= 340; i += 1) load[i]!.answered = 1420;
    for (const i of [310, 311]) {
      load[i] = { ...load[i]!, status: 0, error: 'ECONNRESET' };
      delete load[i]!.answered;
    }
    load[320] = { ...load[320]!, reusedSocket: false, written: 1000 + 320 + 7 };
    const worst = worstAckWindow(phase('1000 req/s', 1000, load));
    expect(worst).toEqual({
      startS: 0.3,
      maxAckMs: 120,
      requests: 100,
      newConnections: 1,
      writtenLateMaxMs: 7,
      errors: { ECONNRESET: 2 },
    });
    expect(worstAckWindow(phase('1000 req/s', 1000, []))).toBeUndefined();
  });
});
