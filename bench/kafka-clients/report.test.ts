import { describe, expect, it } from 'vitest';
import type { ChildResult } from './child.ts';
import type { ClientName } from './clients.ts';
import { requestSizes } from './records.ts';
import { compare, renderReport, summaryFigures, wins, type RoundResult } from './report.ts';

function fetchRun(client: ClientName, round: number, recordsPerSecond: number, extra: Partial<ChildResult> = {}): RoundResult {
  return {
    client,
    round,
    path: 'fetch',
    records: 1000,
    seconds: 1,
    recordsPerSecond,
    cpuUsPerRecord: 10,
    peakRssMb: 100,
    errors: [],
    ...extra,
  };
}

describe('compare', () => {
  it('gives the ratio platformatic / kafkajs per round and a win only when every round clears the margin', () => {
    const c = compare([
      fetchRun('kafkajs', 1, 100),
      fetchRun('platformatic', 1, 130),
      fetchRun('kafkajs', 2, 100),
      fetchRun('platformatic', 2, 125),
    ]);
    const rate = c.find((x) => x.metric.label === 'fetch records/s')!;
    expect(rate.ratios).toEqual([1.3, 1.25]);
    expect(rate.wins).toBe(true);
    expect(wins(c)).toEqual(['fetch records/s']);
  });

  it('is no win when one round falls short', () => {
    const c = compare([
      fetchRun('kafkajs', 1, 100),
      fetchRun('platformatic', 1, 150),
      fetchRun('kafkajs', 2, 100),
      fetchRun('platformatic', 2, 110),
    ]);
    expect(wins(c)).toEqual([]);
  });

  it('counts lower as better for latency, CPU and RSS', () => {
    const c = compare([fetchRun('kafkajs', 1, 100, { cpuUsPerRecord: 10 }), fetchRun('platformatic', 1, 100, { cpuUsPerRecord: 5 })]);
    const cpu = c.find((x) => x.metric.label === 'fetch CPU per record')!;
    expect(cpu.ratios).toEqual([0.5]);
    expect(cpu.advantage).toEqual([2]);
    expect(cpu.wins).toBe(true);
    // CPU alone does not decide the switch: only a hot path's throughput or the ingress p99.
    expect(wins(c)).toEqual([]);
  });

  it('gives a failed run no figure, so it cannot win', () => {
    const c = compare([fetchRun('kafkajs', 1, 100), fetchRun('platformatic', 1, 500, { errors: ['OUT_OF_ORDER_SEQUENCE_NUMBER'] })]);
    expect(c.find((x) => x.metric.label === 'fetch records/s')!.platformatic).toEqual([NaN]);
    expect(wins(c)).toEqual([]);
  });

  it('gives a run whose ledger does not balance no figure', () => {
    const run = (client: ClientName, rate: number): RoundResult => ({
      ...fetchRun(client, 1, rate),
      path: 'ingress',
      latencyMs: { p50: 1, p99: 2, max: 3, count: 9 },
    });
    const c = compare([run('kafkajs', 100), { ...run('platformatic', 200), ledgerOk: false }]);
    expect(c.find((x) => x.metric.label === 'ingress records/s')!.platformatic).toEqual([NaN]);
  });

  it('summarises each client and the ratio, with the switch target on deciding figures', () => {
    const figures = summaryFigures(compare([fetchRun('kafkajs', 1, 100), fetchRun('platformatic', 1, 130)]));
    expect(figures.map((f) => f.label).slice(0, 3)).toEqual([
      'kafkajs fetch records/s',
      'platformatic fetch records/s',
      'ratio platformatic / kafkajs, fetch records/s',
    ]);
    expect(figures[2]!.target).toBe('≥ 1.2 to switch');
  });
});

describe('requestSizes', () => {
  it('stays within 1-50 records and repeats for a seed', () => {
    const sizes = requestSizes(5000);
    expect(Math.min(...sizes)).toBe(1);
    expect(Math.max(...sizes)).toBe(50);
    expect(requestSizes(20)).toEqual(sizes.slice(0, 20));
  });
});

describe('renderReport', () => {
  it('lists every round and the verdict, a failed run as n/a with its error', () => {
    const rounds = [fetchRun('kafkajs', 1, 85_032.4), fetchRun('platformatic', 1, NaN, { errors: ['boom | bang'] })];
    const md = renderReport({
      name: 'kafka-clients',
      command: 'npm run bench:kafka-clients',
      ranAt: '2026-12-03T17:54:07.486Z',
      machine: { cpus: 2, cpuModel: 'AMD EPYC' },
      versions: { node: 'v24.21.0', kafka: '4.1.1', kafkajs: '2.2.4', platformaticKafka: '2.12.1' },
      settings: { brokers: 1, replicationFactor: 1 },
      rounds: rounds as unknown as Array<Record<string, unknown>>,
      summary: [],
    });
    expect(md).toContain('| 1 | fetch | kafkajs | 85,032 |');
    expect(md).toContain('| 1 | fetch | platformatic | n/a |');
    expect(md).toContain('boom / bang');
    expect(md).toContain('Wins by that margin: none.');
    expect(md).toContain('@platformatic/kafka 2.12.1');
  });
});
