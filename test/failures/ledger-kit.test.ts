import { describe, expect, it } from 'vitest';
import { appliedHeaders } from '#domain/apply/index.ts';
import { useTestDatabase } from '../kit/db.ts';
import { testKafka, type ReadRecord, useTestTopics } from '../kit/kafka.ts';
import { analyseLedger, appliedLedger, type AppliedEvent, type LedgerFacts, type StateRow } from '../kit/ledger.ts';

// The shared ledger check must be able to fail: every way the applied topic can betray a
// subscriber (a skipped record, an old record after newer ones, other bytes, a foreign record, a
// last record that is not the state, an acknowledged event never settled) is reported.

const TENANT = 'tenant_ledger';
const KEY = `${TENANT}/theme/thm_a`;

function payload(eventId: string, version: number, action: 'upsert' | 'delete' = 'upsert', tenant = TENANT, id = 'thm_a'): string {
  return JSON.stringify({
    event_id: eventId,
    tenant_id: tenant,
    resource: { type: 'theme', id, version },
    action,
    data: action === 'delete' ? null : { name: `v${version}` },
    occurred_at: '2026-01-01T00:00:00.000Z',
    applied_at: '2026-01-01T00:00:01.000Z',
  });
}

function headersOf(eventId: string, key: string, value: string, offset: number): Record<string, string> {
  return appliedHeaders({ eventId, topic: 'events', partition: 0, offset: String(offset), key, payload: value });
}

/** Applied events e1..en of KEY at versions 1..n (the last a delete when asked). */
function applied(n: number): AppliedEvent[] {
  return Array.from({ length: n }, (_, i) => ({ tenant: TENANT, eventId: `e${i + 1}`, key: KEY, version: i + 1 }));
}

function record(
  offset: number,
  eventId: string,
  version: number,
  options: { key?: string; value?: string; tenant?: string } = {},
): ReadRecord {
  const key = options.key ?? KEY;
  const value = options.value ?? payload(eventId, version, 'upsert', options.tenant);
  return { partition: 0, offset: String(offset), key, value: Buffer.from(value), headers: headersOf(eventId, key, value, version) };
}

/** Records of KEY for the given versions (event e<v>), offsets in order. */
const topic = (...versions: number[]): ReadRecord[] => versions.map((v, i) => record(i, `e${v}`, v));

const stateAt = (version: number, deleted = false): StateRow[] => [{ key: KEY, version, deleted, lastEventId: `e${version}` }];

function problems(facts: Partial<LedgerFacts> & Pick<LedgerFacts, 'records'>): string[] {
  return analyseLedger({ applied: applied(3), state: stateAt(3), ...facts }).problems;
}

describe('the ledger analyser', () => {
  it('passes every applied event once, in order, ending at the state', () => {
    expect(problems({ records: topic(1, 2, 3) })).toEqual([]);
  });

  it('passes byte-identical replays of a batch, whole and in order', () => {
    expect(problems({ records: topic(1, 2, 3, 3) })).toEqual([]);
    expect(problems({ records: topic(1, 2, 1, 2, 3) })).toEqual([]);
    expect(problems({ records: topic(1, 2, 3, 2, 3) })).toEqual([]);
    expect(analyseLedger({ applied: applied(3), state: stateAt(3), records: topic(1, 2, 1, 2, 3) }).repeated).toBe(2);
  });

  it('fails a skipped record (v2 applied, never published)', () => {
    expect(problems({ records: topic(1, 3) })).toEqual([`${KEY}: v2 (e2) applied but skipped: v3 at 0:1 came next`]);
  });

  it('fails an applied record never published at the end', () => {
    expect(problems({ records: topic(1, 2), state: stateAt(2) })).toEqual([`${KEY}: v3 (e3) applied, never published`]);
  });

  it('fails an old record republished after newer ones (what compaction would keep)', () => {
    const found = problems({ records: topic(1, 2, 3, 1) });
    expect(found.some((p) => p.includes('the replay from 0:3 ended at v1, below v3'))).toBe(true);
    expect(found.some((p) => p.includes('the last record (0:3) is v1'))).toBe(true);
    // K v1, K v2, K v1 and then something new: the replay stopped short of v2.
    expect(problems({ records: topic(1, 2, 1, 3) }).some((p) => p.includes('the replay from 0:2 stopped before v2'))).toBe(true);
  });

  it('fails a record that came late, after a newer one (out of order)', () => {
    const found = problems({ records: topic(1, 3, 2) });
    expect(found).toContain(`${KEY}: v2 (e2) applied but skipped: v3 at 0:1 came next`);
    expect(found).toContain(`${KEY}: v2 (e2) at 0:2 came after newer records, never before`);
  });

  it('fails a repeat whose bytes differ (value or headers)', () => {
    const again = record(3, 'e3', 3);
    again.headers = { ...again.headers, 'source-offset': '99' };
    expect(problems({ records: [...topic(1, 2, 3), again] })).toEqual([
      `${KEY}: v3 (e3) published again at 0:3 with other bytes than at 0:2`,
    ]);
    const other = record(3, 'e3', 3, { value: payload('e3', 3).replace('v3', 'v3 again') });
    expect(problems({ records: [...topic(1, 2, 3), other] })).toHaveLength(1);
  });

  it('fails a foreign record: an unknown event, another key, another tenant, not JSON', () => {
    const unknown = record(3, 'e_stranger', 4);
    expect(problems({ records: [...topic(1, 2, 3), unknown] })).toEqual([
      `foreign record at 0:3: ${KEY} v4 (e_stranger) is no applied event of that key`,
      '1 foreign records on the applied topic',
    ]);
    const otherTenant = record(3, 'e9', 9, { key: 'tenant_other/theme/thm_a', tenant: 'tenant_other' });
    expect(problems({ records: [...topic(1, 2, 3), otherTenant], tenant: TENANT })[0]).toContain(
      'of tenant tenant_other, not tenant_ledger',
    );
    const wrongKey = record(3, 'e3', 3, { key: `${TENANT}/theme/thm_b` });
    expect(problems({ records: [...topic(1, 2, 3), wrongKey] })[0]).toContain(`(it applied on ${KEY})`);
    const garbage: ReadRecord = { partition: 1, offset: '0', key: KEY, value: Buffer.from('not json'), headers: {} };
    expect(problems({ records: [...topic(1, 2, 3), garbage] })[0]).toBe(`foreign record at 1:0 (key ${KEY}): not an applied record`);
  });

  it('fails a last record that is not the state (version, or the deleted flag)', () => {
    expect(problems({ records: topic(1, 2, 3), state: stateAt(3, true) })).toEqual([
      `${KEY}: the last record (0:2) is v3 (e3), resource_state holds v3 deleted (e3)`,
    ]);
    expect(problems({ records: [], applied: [], state: stateAt(3) })).toEqual([
      `${KEY}: resource_state holds v3 (e3), the applied topic has no record of it`,
    ]);
  });

  it('fails a record whose value is not its outbox row, and an event applied twice', () => {
    const outbox = new Map([
      [`${KEY} e1`, [payload('e1', 1)]],
      [`${KEY} e2`, [payload('e2', 2), payload('e2', 2)]],
      [`${KEY} e3`, ['{"other":"bytes"}']],
    ]);
    expect(problems({ records: topic(1, 2, 3), outbox })).toEqual([
      `${KEY}: e2 (v2) has 2 outbox rows`,
      `${KEY} v3 (e3) at 0:2: the value is not its outbox row's bytes`,
    ]);
  });

  it('fails an acknowledged event that never settled, and poison that was not dead-lettered', () => {
    const acceptedStatus = new Map([
      ['e1', 'applied'],
      ['e_lost', 'missing'],
      ['e_retrying', 'retrying'],
      ['e_poison', 'applied'],
      ['e_poison_ok', 'dead_lettered'],
    ]);
    expect(problems({ records: topic(1, 2, 3), acceptedStatus, deadLettered: new Set(['e_poison', 'e_poison_ok']) })).toEqual([
      'accepted e_lost ended missing, not settled',
      'accepted e_retrying ended retrying, not settled',
      'accepted e_poison (sent to be dead-lettered) ended applied',
    ]);
  });
});

describe('appliedLedger on a real topic and database', () => {
  const db = useTestDatabase();
  const kafka = testKafka();
  const appliedTopic = useTestTopics(kafka).names.applied;

  it('reads the inbox, state, outbox and topic: a skipped v2 and an unsettled 2xx are reported', async () => {
    for (const v of [1, 2, 3]) {
      await db.pool.query(
        `INSERT INTO inbox_events (event_id, tenant_id, resource_type, resource_id, resource_version, status, body_sha256, payload)
         VALUES ($1, $2, 'theme', 'thm_a', $3, 'applied', 'x', '{}')`,
        [`e${v}`, TENANT, v],
      );
      await db.pool.query(
        `INSERT INTO applied_outbox (event_id, key, payload, source_topic, source_partition, source_offset) VALUES ($1, $2, $3, 'events', 0, $4)`,
        [`e${v}`, KEY, payload(`e${v}`, v), v],
      );
    }
    await db.pool.query(
      `INSERT INTO inbox_events (event_id, tenant_id, resource_type, resource_id, resource_version, status, body_sha256, payload)
       VALUES ('e4', $1, 'theme', 'thm_a', 4, 'retrying', 'x', '{}')`,
      [TENANT],
    );
    await db.pool.query(
      `INSERT INTO resource_state (tenant_id, resource_type, resource_id, version, last_event_id) VALUES ($1, 'theme', 'thm_a', 3, 'e3')`,
      [TENANT],
    );
    const producer = kafka.producer();
    await producer.connect();
    await producer.send({
      topic: appliedTopic,
      messages: [1, 3].map((v) => {
        const value = payload(`e${v}`, v);
        return { key: KEY, value, headers: headersOf(`e${v}`, KEY, value, v), partition: 0 };
      }),
    });
    await producer.disconnect();
    const report = await appliedLedger({ pool: db.pool, kafka, appliedTopic, tenant: TENANT, accepted: ['e1', 'e3', 'e4'] });
    expect(report.problems).toEqual([
      `${KEY}: v2 (e2) applied but skipped: v3 at 0:1 came next`,
      'accepted e4 ended retrying, not settled',
    ]);
    expect(report).toMatchObject({ records: 2, applied: 3, statuses: { applied: 2, retrying: 1 } });
  });
});
