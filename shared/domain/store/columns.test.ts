import { describe, expect, it } from 'vitest';
import type { QueryConfig } from 'pg';
import { readChunkContext, writeChunkEffects } from './chunk.ts';
import {
  bool,
  booleanArray,
  columns,
  int4,
  int8,
  integerArray,
  PackedBytes,
  packedJsonbOrNull,
  packedText,
  recordsetOf,
  statement,
  text,
  textArray,
  timestamptz,
  unnestOf,
  valuesOf,
} from './columns.ts';
import { insertFailedEvent, selectInboxStatuses } from './inbox.ts';
import { pruneInboxBodies } from './retention.ts';
import type { Queryable } from './session.ts';

describe('array literals', () => {
  it('quotes every element and escapes only quotes and backslashes', () => {
    expect(textArray(['a', 'b c', 'x"y', 'back\\slash', '', null, undefined, '{,}', 'NULL'])).toBe(
      '{"a","b c","x\\"y","back\\\\slash","",NULL,NULL,"{,}","NULL"}',
    );
    expect(textArray([])).toBe('{}');
    expect(integerArray([1, '42', -1])).toBe('{1,42,-1}');
    expect(booleanArray([true, false])).toBe('{t,f}');
  });

  it('writes null and undefined integers as NULL elements', () => {
    expect(integerArray([null, 3, undefined, '9007199254740993'])).toBe('{NULL,3,NULL,9007199254740993}');
    expect(integerArray([])).toBe('{}');
  });

  it('gives the same literal on the shortcuts for plain and all-null columns', () => {
    expect(textArray(['a', 'b c', '{,}', 'NULL', ''])).toBe('{"a","b c","{,}","NULL",""}');
    expect(textArray([null, undefined, null])).toBe('{NULL,NULL,NULL}');
    expect(textArray([null])).toBe('{NULL}');
    expect(textArray(['x"y', 'a'])).toBe('{"x\\"y","a"}');
    expect(textArray([null, 'a'])).toBe('{NULL,"a"}');
    expect(textArray(['a', null])).toBe('{"a",NULL}');
  });
});

describe('PackedBytes', () => {
  it('addresses each value by a 1-based offset and its byte length; null is length -1', () => {
    const packed = new PackedBytes();
    packed.add('ab');
    packed.add(null);
    packed.add(Buffer.from('é!'));
    packed.add('');
    const [bytes, offsets, lengths] = packed.params();
    expect(bytes.toString('utf8')).toBe('abé!');
    expect(offsets).toBe('{1,1,3,6}');
    expect(lengths).toBe('{2,-1,3,0}');
  });
});

const SPEC = columns({ id: text, n: int8, body: packedText, at: timestamptz, data: packedJsonbOrNull, ok: bool, small: int4 });

describe('unnestOf', () => {
  it('declares each column once: unnest casts, names and select list in spec order, numbered from the first parameter', () => {
    const placed = unnestOf(SPEC, 'r')(4);
    expect(placed.from).toBe(
      'unnest($4::text[], $5::bigint[], $7::int[], $8::int[], $9::timestamptz[], $11::int[], $12::int[], $13::boolean[], $14::int[]) ' +
        'AS r(id, n, body_off, body_len, at, data_off, data_len, ok, small)',
    );
    expect(placed.names).toBe('id, n, body, at, data, ok, small');
    expect(placed.select).toBe(
      "r.id, r.n, convert_from(substring($6::bytea FROM r.body_off FOR r.body_len), 'UTF8'), r.at, " +
        "CASE WHEN r.data_len < 0 THEN NULL ELSE convert_from(substring($10::bytea FROM r.data_off FOR r.data_len), 'UTF8')::jsonb END, r.ok, r.small",
    );
    expect(placed.width).toBe(11);
  });

  it('encodes typed rows into one parameter per column, three per packed column, in placeholder order', () => {
    const values = unnestOf(
      SPEC,
      'r',
    )(1).encode([
      { id: 'a', n: 1, body: 'xy', at: '2024-01-01T00:00:00.000Z', data: null, ok: true, small: null },
      { id: null, n: '2', body: Buffer.from('é'), at: null, data: '{}', ok: false, small: 7 },
    ]);
    expect(values).toEqual([
      '{"a",NULL}',
      '{1,2}',
      Buffer.from('xyé'),
      '{1,3}',
      '{2,2}',
      '{"2024-01-01T00:00:00.000Z",NULL}',
      Buffer.from('{}'),
      '{1,1}',
      '{-1,2}',
      '{t,f}',
      '{NULL,7}',
    ]);
  });

  it('adds an ordinality column when asked', () => {
    expect(unnestOf(columns({ k: text }), 'r', { ordinality: 'n' })(1).from).toBe('unnest($1::text[]) WITH ORDINALITY AS r(k, n)');
  });

  it('encodes no rows as empty arrays', () => {
    expect(unnestOf(columns({ k: text, b: packedText }), 'r')(1).encode([])).toEqual(['{}', Buffer.alloc(0), '{}', '{}']);
  });
});

describe('recordsetOf', () => {
  it('types each column in the recordset definition and sends the rows as one JSON parameter', () => {
    const placed = recordsetOf(columns({ id: text, v: int8 }), 'r')(3);
    expect(placed.from).toBe('json_to_recordset($3::json) AS r(id text, v bigint)');
    expect(placed.select).toBe('r.id, r.v');
    expect(placed.width).toBe(1);
    expect(placed.encode([{ id: 'a', v: 1 }])).toEqual(['[{"id":"a","v":1}]']);
  });

  it('refuses a packed column', () => {
    expect(() => recordsetOf(columns({ body: packedText }), 'r')).toThrow(/packed/);
  });
});

describe('valuesOf', () => {
  it('numbers one placeholder per column and lays one row out in that order', () => {
    const placed = valuesOf(columns({ a: text, b: int4, c: text }))(2);
    expect(placed.names).toBe('a, b, c');
    expect(placed.placeholders).toBe('$2, $3, $4');
    expect(placed.encode([{ c: 'z', b: 5, a: 'x' }])).toEqual(['x', 5, 'z']);
    expect(() => placed.encode([])).toThrow(/one row/);
  });
});

describe('statement', () => {
  it('numbers the sources one after another and lays the values out in the same order', () => {
    const s = statement(
      { first: unnestOf(columns({ a: text, b: packedText }), 'x'), second: recordsetOf(columns({ c: int4 }), 'y') },
      ({ first, second }) => `SELECT ${first.select} FROM ${first.from}, ${second.from}`,
    );
    expect(s.text).toBe(
      "SELECT x.a, convert_from(substring($2::bytea FROM x.b_off FOR x.b_len), 'UTF8') FROM unnest($1::text[], $3::int[], $4::int[]) AS x(a, b_off, b_len), json_to_recordset($5::json) AS y(c int)",
    );
    expect(s.values({ first: [{ a: 'q', b: 'r' }], second: [{ c: 1 }] })).toEqual(['{"q"}', Buffer.from('r'), '{1}', '{1}', '[{"c":1}]']);
  });

  it('refuses a statement that uses a part its source does not have', () => {
    expect(() => statement({ row: valuesOf(columns({ a: text })) }, ({ row }) => `SELECT * FROM ${row.from}`)).toThrow(/does not have/);
  });
});

/** Every statement the store builds from column specs: each placeholder $1..$n has its value, none is left over. */
describe('the store statements built from column specs', () => {
  const captured: QueryConfig[] = [];
  const client: Queryable = {
    query: async (config) => {
      captured.push(config);
      return {
        rows: [{ inbox_rows: 0, state_rows: 0, outbox_rows: 0, anomaly_rows: 0 }],
        rowCount: 0,
        command: '',
        oid: 0,
        fields: [],
      } as never;
    },
  };
  const placeholders = (t: string) => [...new Set([...t.matchAll(/\$(\d+)/g)].map((m) => Number(m[1])))].sort((a, b) => a - b);

  it('line up with their values', async () => {
    captured.length = 0;
    await readChunkContext(client, {
      events: [{ tenant_id: 't', event_id: 'e' }],
      idempotencyKeys: [{ tenant_id: 't', idempotency_key: 'i' }],
      resources: [{ tenant_id: 't', resource_type: 'theme', resource_id: 'r' }],
    });
    await writeChunkEffects(client, {
      inbox: [
        {
          event_id: 'e',
          idempotency_key: undefined,
          duplicate_of: undefined,
          tenant_id: 't',
          resource_type: 'theme',
          resource_id: 'r',
          resource_version: 1,
          event_type: 'theme.updated',
          status: 'applied',
          reason: undefined,
          body_sha256: 'h',
          source_topic: 'in',
          source_partition: 0,
          source_offset: '5',
          occurred_at: '2024-01-01T00:00:00Z',
          received_at: null,
          delivery_attempt: undefined,
          source: 'src',
          reconcile_trigger: undefined,
          trace_id: undefined,
          payload: Buffer.from('{}'),
        },
      ],
      state: [
        {
          tenant_id: 't',
          resource_type: 'theme',
          resource_id: 'r',
          version: 1,
          deleted: false,
          last_event_id: 'e',
          source_partition: 0,
          data: '{}',
          last_occurred_at: null,
          ordered_by: 'version',
        },
      ],
      outbox: [
        {
          event_id: 'e',
          key: 't/theme/r',
          source_topic: 'in',
          source_partition: 0,
          source_offset: '5',
          payload: '{}',
          traceparent: null,
          tracestate: null,
        },
      ],
      anomalies: [],
    });
    await insertFailedEvent(client, {
      event_id: 'e',
      idempotency_key: null,
      tenant_id: 't',
      resource_type: 'theme',
      resource_id: 'r',
      resource_version: 1,
      event_type: 'x',
      status: 'retrying',
      reason: 'r',
      attempts: 1,
      last_error: 'boom',
      body_sha256: 'h',
      payload: '{}',
      source_topic: 'in',
      source_partition: 0,
      source_offset: '5',
      occurred_at: '2024-01-01T00:00:00Z',
      received_at: null,
      delivery_attempt: null,
      trace_id: null,
    });
    await selectInboxStatuses(client, [{ tenant_id: 't', event_id: 'e' }]);
    await pruneInboxBodies(client, [{ tenant_id: 't', event_id: 'e', fingerprint: null }]);
    expect(captured).toHaveLength(5);
    for (const { text: sql, values } of captured) {
      const used = placeholders(sql);
      expect(used).toEqual(Array.from({ length: values!.length }, (_, i) => i + 1));
    }
    // The chunk write: 21 inbox parameters (with the trace id; +2 for the packed body), 10 (+2) state (with the partition, last_occurred_at and ordered_by), 8 (+2) outbox (with the trace context), 1 anomalies.
    expect(captured[1]!.values).toHaveLength(23 + 12 + 10 + 1);
  });
});
