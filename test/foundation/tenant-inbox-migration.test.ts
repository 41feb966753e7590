import { copyFile, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SnapshotApplier, type SourceRecord } from '#domain/apply/index.ts';
import { contractExampleEvent, resourceKey, type EventEnvelope } from '#domain/contract/index.ts';
import { defaultMigrationsDir, migrate } from '#domain/store/migrate.ts';
import { useTestDatabase } from '../kit/db.ts';

let offset = 0;
function record(envelope: EventEnvelope, text = JSON.stringify(envelope)): SourceRecord {
  offset += 1;
  return { topic: 'theme.events', partition: 0, offset: String(offset), key: resourceKey(envelope), value: Buffer.from(text) };
}

// Migration 0003 keys the inbox by (tenant, event id) and lets only the applied event claim an
// idempotency key. Rows written before it must keep deduplicating (redeliveries by fingerprint).
describe('migration 0003 (tenant-scoped inbox) on a database with rows from before', () => {
  const db = useTestDatabase({ empty: true });
  let before: string;
  const applied = contractExampleEvent();
  const stale = {
    ...contractExampleEvent(),
    event_id: 'evt_old_stale',
    idempotency_key: 'theme:thm_123:v7',
    resource: { type: 'theme', id: 'thm_123', version: 7 },
  };

  beforeAll(async () => {
    before = await mkdtemp(path.join(os.tmpdir(), 'migrations-0002-'));
    for (const file of ['0001_init.sql', '0002_outbox_cursor.sql'])
      await copyFile(path.join(defaultMigrationsDir, file), path.join(before, file));
    await migrate(db.pool, { dir: before });
    // What the old worker left: the example applied, a stale event that (then) claimed its idempotency key.
    for (const [event, status] of [
      [applied, 'applied'],
      [stale, 'stale'],
    ] as const) {
      await db.pool.query(
        `INSERT INTO inbox_events (event_id, idempotency_key, tenant_id, resource_type, resource_id, resource_version, event_type,
           status, body_sha256, payload)
         VALUES ($1, $2, $3, 'theme', $4, $5, $6, $7, 'old-sha', $8)`,
        [
          event.event_id,
          event.idempotency_key,
          event.tenant_id,
          event.resource.id,
          event.resource.version,
          event.event_type,
          status,
          JSON.stringify(event),
        ],
      );
    }
    await db.pool.query(
      `INSERT INTO resource_state (tenant_id, resource_type, resource_id, version, data, last_event_id) VALUES ($1, 'theme', $2, 42, $3, $4)`,
      [applied.tenant_id, applied.resource.id, JSON.stringify(applied.data), applied.event_id],
    );
    await migrate(db.pool);
  });
  afterAll(async () => {
    if (before) await rm(before, { recursive: true, force: true });
  });

  it('a redelivery of an old row is a duplicate; other content under its id is quarantined', async () => {
    const applier = new SnapshotApplier({ pool: db.pool });
    const redelivered = { ...applied, delivery_attempt: 2 };
    const changed = { ...applied, data: { ...applied.data, name: 'Changed' } };
    const results = await applier.applyBatch([record(redelivered, JSON.stringify(redelivered, null, 2)), record(changed)]);
    expect(results.map((r) => r.outcome)).toEqual(['duplicate', 'quarantined']);
  });

  it("the same event id under another tenant is another event; an old stale row's idempotency key no longer blocks", async () => {
    const applier = new SnapshotApplier({ pool: db.pool });
    const otherTenant = { ...applied, tenant_id: 'tenant_other' };
    const corrected = { ...stale, event_id: 'evt_corrected', resource: { ...stale.resource, version: 43 } };
    const results = await applier.applyBatch([record(otherTenant), record(corrected)]);
    expect(results.map((r) => r.outcome)).toEqual(['applied', 'applied']);
    const { rows } = await db.pool.query(
      `SELECT tenant_id, event_id, status FROM inbox_events WHERE event_id IN ($1, 'evt_corrected') ORDER BY tenant_id, event_id`,
      [applied.event_id],
    );
    expect(rows).toEqual([
      { tenant_id: 'tenant_acme', event_id: applied.event_id, status: 'applied' },
      { tenant_id: 'tenant_acme', event_id: 'evt_corrected', status: 'applied' },
      { tenant_id: 'tenant_other', event_id: applied.event_id, status: 'applied' },
    ]);
  });
});
