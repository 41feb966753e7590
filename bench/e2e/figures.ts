// bench:e2e's figures from what the phases measured (bench/e2e/phases.ts) and what the bench's
// watchers saw (bench/e2e/observe.ts): per phase, the latency of each stage and the ledger; per
// rate, the bridge against the floor; the figures a run keeps in e2e.json; the targets they meet.
import type { BenchRun } from '../lib/results.ts';
import { ratio } from '../lib/spread.ts';
import { summarise, type Summary } from '../lib/stats.ts';
import type { AppliedWatch, CommitWatch } from './observe.ts';
import type { FloorPhase, Phase } from './phases.ts';

// The bridge's targets: POST -> applied record p99 at 100 and 1,000 req/s, and each service's peak RSS.
export const TARGETS = { p99At100: 50, p99At1000: 150, ingressRssMb: 150, workerRssMb: 250 };
// The bridge may add at most this much to the path through Kafka alone: bridge p99 / floor p99 at
// 100 and 1,000 req/s.
export const FLOOR_RATIO_TARGET = 2.0;

export interface Stages {
  total: Summary;
  ack: Summary;
  ackToCommit: Summary;
  ackToTxStart: Summary;
  txStartToCommit: Summary;
  commitToPublished: Summary;
  commitToSend: Summary;
  sendToReceived: Summary;
  /** ack -> relay send (the applied record's Kafka timestamp): the floor's middle hop, for comparison. */
  ackToSend: Summary;
}

export interface Ledger {
  sent: number;
  accepted: number;
  other: Record<string, number>;
  applied: number;
  /** 2xx, no applied record, and no inbox row that explains it. */
  lost: number;
  /** 2xx, no applied record, and the worker's inbox says why (stale: a newer version applied first). */
  notApplied: Record<string, number>;
  /** Applied records of this phase's events that were not answered 2xx. */
  extra: number;
  commitsSeen: number;
}

/** What the run saw besides the answers: the applied records, the worker's commits, the inbox's reasons. */
export interface Observed {
  applied: AppliedWatch;
  commits: CommitWatch;
  /** Events the worker did not apply (stale, duplicate, quarantined, ...): their inbox status. */
  notApplied: ReadonlyMap<string, string>;
}

export interface Measured {
  phase: Phase;
  stages: Stages;
  ledger: Ledger;
}

/** Per phase: each stage over the events that reached it, and the ledger. */
export function stagesOf(phase: Phase, observed: Observed): Measured {
  const v = {
    total: [] as number[],
    ack: [] as number[],
    ackToCommit: [] as number[],
    ackToTxStart: [] as number[],
    txStartToCommit: [] as number[],
    commitToPublished: [] as number[],
    commitToSend: [] as number[],
    sendToReceived: [] as number[],
    ackToSend: [] as number[],
  };
  const ledger: Ledger = {
    sent: phase.load.sent.length,
    accepted: 0,
    other: {},
    applied: 0,
    lost: 0,
    notApplied: {},
    extra: 0,
    commitsSeen: 0,
  };
  for (const s of phase.load.sent) {
    const record = observed.applied.seen.get(s.eventId);
    const commit = observed.commits.seen.get(s.eventId);
    if (commit) ledger.commitsSeen += 1;
    if (s.status < 200 || s.status >= 300) {
      const key = s.status === 0 ? `no answer (${s.error ?? 'unknown'})` : String(s.status);
      ledger.other[key] = (ledger.other[key] ?? 0) + 1;
      if (record) ledger.extra += 1;
      continue;
    }
    ledger.accepted += 1;
    if (!record) {
      const status = observed.notApplied.get(s.eventId);
      if (status === undefined) ledger.lost += 1;
      else ledger.notApplied[status] = (ledger.notApplied[status] ?? 0) + 1;
      continue;
    }
    ledger.applied += 1;
    const ack = s.answered!;
    v.total.push(record.received - s.due);
    v.ack.push(ack - s.due);
    if (commit) {
      v.ackToCommit.push(commit.observed - ack);
      v.ackToTxStart.push(commit.transactionStart - ack);
      v.txStartToCommit.push(commit.observed - commit.transactionStart);
      v.commitToPublished.push(record.received - commit.observed);
      v.commitToSend.push(record.kafkaTimestamp - commit.observed);
    }
    v.sendToReceived.push(record.received - record.kafkaTimestamp);
    v.ackToSend.push(record.kafkaTimestamp - ack);
  }
  const stages = Object.fromEntries(Object.entries(v).map(([k, values]) => [k, summarise(values)])) as unknown as Stages;
  return { phase, stages, ledger };
}

/** The floor's stages, the same points in time as the bridge's where they exist. */
export interface FloorStages {
  /** due -> received by the read_committed consumer. */
  total: Summary;
  /** due -> the idempotent producer's send resolved (acks=all). */
  ack: Summary;
  /** ack -> the re-produced record's Kafka timestamp (fetched by the group member, transaction begun, sent). */
  ackToSend: Summary;
  /** re-produce send -> received (transaction commit, LSO, fetch). */
  sendToReceived: Summary;
}

export interface FloorLedger {
  sent: number;
  acked: number;
  received: number;
  /** Acked, not read committed within the drain timeout. */
  lost: number;
  errors: number;
}

export interface MeasuredFloor {
  phase: FloorPhase;
  stages: FloorStages;
  ledger: FloorLedger;
}

/** Per floor phase: its stages and ledger. */
export function floorStagesOf(phase: FloorPhase): MeasuredFloor {
  const v = { total: [] as number[], ack: [] as number[], ackToSend: [] as number[], sendToReceived: [] as number[] };
  const ledger: FloorLedger = { sent: phase.result.sent.length, acked: 0, received: 0, lost: 0, errors: 0 };
  for (const x of phase.result.sent) {
    if (x.acked === undefined) {
      ledger.errors += 1;
      continue;
    }
    ledger.acked += 1;
    const record = phase.result.seen.get(x.id);
    if (!record) {
      ledger.lost += 1;
      continue;
    }
    ledger.received += 1;
    v.total.push(record.received - x.due);
    v.ack.push(x.acked - x.due);
    v.ackToSend.push(record.kafkaTimestamp - x.acked);
    v.sendToReceived.push(record.received - record.kafkaTimestamp);
  }
  const stages = Object.fromEntries(Object.entries(v).map(([k, values]) => [k, summarise(values)])) as unknown as FloorStages;
  return { phase, stages, ledger };
}

export interface Totals {
  accepted: number;
  applied: number;
  lost: number;
  notApplied: number;
  extra: number;
  other: number;
}

/** The ledger over every phase, the warm-up included. */
export function totalsOf(measured: readonly Measured[]): Totals {
  return measured.reduce(
    (t, m) => ({
      accepted: t.accepted + m.ledger.accepted,
      applied: t.applied + m.ledger.applied,
      lost: t.lost + m.ledger.lost,
      notApplied: t.notApplied + Object.values(m.ledger.notApplied).reduce((a, b) => a + b, 0),
      extra: t.extra + m.ledger.extra,
      other: t.other + Object.values(m.ledger.other).reduce((a, b) => a + b, 0),
    }),
    { accepted: 0, applied: 0, lost: 0, notApplied: 0, extra: 0, other: 0 },
  );
}

/** Applied records of event ids this run did not send. */
export function foreignRecords(phases: readonly Phase[], applied: AppliedWatch): number {
  const ourIds = new Set(phases.flatMap((p) => p.load.sent.map((s) => s.eventId)));
  return [...applied.seen.keys()].filter((id) => !ourIds.has(id)).length;
}

export interface Comparison {
  rate: number;
  bridge: { p50: number; p99: number };
  floor: { p50: number; p99: number };
  ratioP99: number;
  ratioP50: number;
  /** The same three points in time on both paths. */
  stages: {
    ack: { bridge: Summary; floor: Summary };
    ackToSend: { bridge: Summary; floor: Summary };
    sendToReceived: { bridge: Summary; floor: Summary };
  };
}

/** The bridge against the floor at each measured rate that has a floor phase. */
export function comparisons(measuredRates: readonly Measured[], floorMeasured: readonly MeasuredFloor[]): Comparison[] {
  const floorByRate = (rate: number) => floorMeasured.find((m) => m.phase.result.rate === rate);
  return measuredRates.flatMap((m) => {
    const f = floorByRate(m.phase.rate);
    if (!f) return [];
    const b = m.stages;
    return [
      {
        rate: m.phase.rate,
        bridge: { p50: b.total.p50, p99: b.total.p99 },
        floor: { p50: f.stages.total.p50, p99: f.stages.total.p99 },
        ratioP99: ratio(b.total.p99, f.stages.total.p99),
        ratioP50: ratio(b.total.p50, f.stages.total.p50),
        stages: {
          ack: { bridge: b.ack, floor: f.stages.ack },
          ackToSend: { bridge: b.ackToSend, floor: f.stages.ackToSend },
          sendToReceived: { bridge: b.sendToReceived, floor: f.stages.sendToReceived },
        },
      },
    ];
  });
}

/** The labels of the figures each run keeps in e2e.json's runs. */
export const runFigureLabel = {
  bridgeP99: (rate: number) => `bridge p99 at ${rate.toLocaleString('en')} req/s (ms)`,
  floorP99: (rate: number) => `floor p99 at ${rate.toLocaleString('en')} req/s (ms)`,
  ratio: (rate: number) => `bridge p99 / floor p99 at ${rate.toLocaleString('en')} req/s`,
};

/** This run's figures for e2e.json's runs: per compared rate, both p99s and their ratio. */
export function runFigures(compared: readonly Comparison[]): BenchRun['figures'] {
  return Object.fromEntries(
    compared.flatMap((c) => [
      [runFigureLabel.bridgeP99(c.rate), Number(c.bridge.p99.toFixed(2))],
      [runFigureLabel.floorP99(c.rate), Number(c.floor.p99.toFixed(2))],
      [runFigureLabel.ratio(c.rate), Number(c.ratioP99.toFixed(3))],
    ]),
  );
}

/** Every answered event's points in time (wall ms), one CSV line each, to look for what the percentiles hide. */
export function eventsCsv(phases: readonly Phase[], observed: Pick<Observed, 'applied' | 'commits'>): string {
  const rows = ['phase,event_id,status,due,ack,tx_start,commit_visible,relay_send,received,reused_socket,connected,written,error'];
  for (const p of phases)
    for (const s of p.load.sent) {
      const commit = observed.commits.seen.get(s.eventId);
      const record = observed.applied.seen.get(s.eventId);
      rows.push(
        [
          JSON.stringify(p.name),
          s.eventId,
          s.status,
          s.due,
          s.answered ?? '',
          commit?.transactionStart ?? '',
          commit?.observed ?? '',
          record?.kafkaTimestamp ?? '',
          record?.received ?? '',
          s.reusedSocket ?? '',
          s.connected ?? '',
          s.written ?? '',
          s.error ?? '',
        ].join(','),
      );
    }
  return `${rows.join('\n')}\n`;
}

/** The slowest stretch of a phase's acks: where a stall of the ack path sits, and what the requests in it saw. */
export interface AckWindow {
  /** Seconds from the phase's first due time to the window's start. */
  startS: number;
  /** The slowest answer in the window, from its due time to its response head (transport errors have none). */
  maxAckMs: number;
  requests: number;
  /** Requests in the window sent on a connection opened for them. */
  newConnections: number;
  /** How late the generator handed a request's last byte to the kernel, at most: a late send is the generator's, not the bridge's. */
  writtenLateMaxMs: number;
  /** Transport errors in the window by code (ECONNRESET, timeout, ...). */
  errors: Record<string, number>;
}

/**
 * The window of `windowMs` (by due time) holding the phase's slowest answer. A stall shows here in
 * every run's report, with whether its requests left the generator on time, instead of only in
 * the per-event file (BENCH_EVENTS_CSV).
 */
export function worstAckWindow(phase: Phase, windowMs = 100): AckWindow | undefined {
  const sent = phase.load.sent;
  if (sent.length === 0) return undefined;
  const start = sent.reduce((min, s) => Math.min(min, s.due), Number.POSITIVE_INFINITY);
  const slowest = sent.reduce<(typeof sent)[number] | undefined>(
    (worst, s) => (s.answered !== undefined && (worst === undefined || s.answered - s.due > worst.answered! - worst.due) ? s : worst),
    undefined,
  );
  if (slowest === undefined) return undefined;
  const index = Math.floor((slowest.due - start) / windowMs);
  const inWindow = sent.filter((s) => Math.floor((s.due - start) / windowMs) === index);
  const errors: Record<string, number> = {};
  for (const s of inWindow) if (s.error !== undefined) errors[s.error] = (errors[s.error] ?? 0) + 1;
  return {
    startS: (index * windowMs) / 1000,
    maxAckMs: slowest.answered! - slowest.due,
    requests: inWindow.length,
    newConnections: inWindow.filter((s) => s.reusedSocket === false).length,
    writtenLateMaxMs: inWindow.reduce((max, s) => (s.written === undefined ? max : Math.max(max, s.written - s.due)), 0),
    errors,
  };
}
