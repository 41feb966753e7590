import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { sampleThemeEvent, type EventEnvelope } from '#domain/contract/index.ts';
import { defaultRetentionSettings, RetentionPruner } from '#domain/retention/index.ts';
import { freshEventId, freshId, hmacSource, resourceKeyOf, SECRET_A, useHarness } from '../kit/harness.ts';

// A body stored by an earlier release may no longer parse under today's contract (here: it counted
// delivery attempts from 0, today's envelope wants >= 1). Retention used to keep a NULL fingerprint
// for such a body, so the provider's next legitimate redelivery of that event could not be
// compared and was quarantined as an anomaly, dead-lettered and alerted. The real ingress, worker,
// broker and Postgres; the old rows are written as the earlier release left them.

const TENANT = 'tenant_ret';
const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

describe('retention keeps what deduplication needs, whatever the body parses to today', () => {
  const h = useHarness({ sources: [hmacSource('src', SECRET_A, [TENANT])] });

  function event(): EventEnvelope {
    return sampleThemeEvent({ tenant_id: TENANT, event_id: freshEventId(), resource: { id: freshId('thm'), version: 1 } });
  }

  /** An inbox row as an earlier release left it: applied `daysAgo` days ago, with its body. */
  async function storedEarlier(stored: Record<string, unknown>, daysAgo: number): Promise<void> {
    const body = JSON.stringify(stored);
    const e = stored as unknown as EventEnvelope;
    await h.db.pool.query(
      `INSERT INTO inbox_events (tenant_id, event_id, resource_type, resource_id, resource_version, event_type, status,
         body_sha256, payload, first_seen_at, updated_at)
       VALUES ($1, $2, 'theme', $3, 1, $4, 'applied', $5, $6, now() - make_interval(days => $7), now() - make_interval(days => $7))`,
      [e.tenant_id, e.event_id, e.resource.id, e.event_type, sha256(body), body, daysAgo],
    );
    await h.db.pool.query(
      `INSERT INTO resource_state (tenant_id, resource_type, resource_id, version, deleted, data, last_event_id)
       VALUES ($1, 'theme', $2, 1, false, $3, $4)`,
      [e.tenant_id, e.resource.id, JSON.stringify(e.data), e.event_id],
    );
  }

  async function fingerprintOf(e: EventEnvelope): Promise<{ payload: string | null; fingerprint: string | null }> {
    const { rows } = await h.db.pool.query<{ payload: string | null; fingerprint: string | null }>(
      'SELECT payload, fingerprint FROM inbox_events WHERE tenant_id = $1 AND event_id = $2',
      [e.tenant_id, e.event_id],
    );
    return rows[0]!;
  }

  it('a redelivery of an event whose old body was pruned, or is kept but no longer parses, is a duplicate; other content is still an anomaly', async () => {
    const pruned = event();
    const kept = event();
    const changed = event();
    await storedEarlier({ ...pruned, delivery_attempt: 0 }, 40);
    await storedEarlier({ ...kept, delivery_attempt: 0 }, 1);
    await storedEarlier(changed, 40);

    const report = await new RetentionPruner({
      pool: h.db.pool,
      settings: { ...defaultRetentionSettings, bodyDays: 30, inboxDays: 0, outboxDays: 0, maxSeconds: 0 },
    }).run();
    expect(report.result).toBe('complete');
    const afterPrune = await fingerprintOf(pruned);
    expect(afterPrune.payload).toBeNull();
    expect(afterPrune.fingerprint, 'the pruned body left no fingerprint').not.toBeNull();
    expect((await fingerprintOf(kept)).payload).not.toBeNull();

    // The provider redelivers both events (its attempt 2, re-serialised with other whitespace),
    // and sends the third event id again with other content.
    for (const e of [pruned, kept]) {
      const answer = await h.post('src', JSON.stringify({ ...e, delivery_attempt: 2 }, null, 1));
      expect(answer.status, answer.body).toBe(202);
    }
    const other = { ...changed, data: { ...changed.data, name: 'Another name' } };
    expect((await h.post('src', JSON.stringify(other))).status).toBe(202);
    await h.settle();

    for (const e of [pruned, kept]) {
      expect(await h.anomalies(TENANT, e.event_id), `${e.event_id} quarantined`).toBe(0);
      expect(await h.dlq(resourceKeyOf(e))).toEqual([]);
      expect((await h.inbox(TENANT, e.event_id))?.status).toBe('applied');
    }
    expect(await h.anomalies(TENANT, changed.event_id)).toBe(1);
    expect(await h.dlq(resourceKeyOf(changed))).toHaveLength(1);
  });
});
