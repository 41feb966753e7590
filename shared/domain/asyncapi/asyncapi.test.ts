import { readFileSync } from 'node:fs';
import { Parser } from '@asyncapi/parser';
import { describe, expect, it } from 'vitest';
import { renderAsyncApi, renderAsyncApiFile } from './asyncapi.ts';
import { ASYNCAPI_FILE } from './file.ts';

describe('the AsyncAPI document (docs/asyncapi.json)', () => {
  it('is what the code generates (run npm run asyncapi after changing a schema, a header or a topic)', () => {
    expect(readFileSync(ASYNCAPI_FILE, 'utf8')).toBe(renderAsyncApiFile());
  });

  it('is a valid AsyncAPI 3 document (@asyncapi/parser), without errors', async () => {
    const { document, diagnostics } = await new Parser().parse(readFileSync(ASYNCAPI_FILE, 'utf8'));
    const errors = diagnostics.filter((d) => d.severity === 0).map((d) => `${d.path.join('.')}: ${d.message}`);
    expect(errors).toEqual([]);
    expect(document?.version()).toBe('3.0.0');
    expect(
      document
        ?.channels()
        .all()
        .map((c) => c.address()),
    ).toEqual([
      'theme.events',
      'theme.events.retry.1',
      'theme.events.retry.2',
      'theme.events.retry.3',
      'theme.events.retry.4',
      'theme.events.dlq',
      'theme.applied',
    ]);
  });

  it('describes every topic with its Kafka binding, and follows the settings', () => {
    const doc = renderAsyncApi({
      events: 'e',
      applied: 'a',
      eventsPartitions: 6,
      retryLevels: 2,
      replicationFactor: 3,
      minInsyncReplicas: 2,
    }) as {
      channels: Record<
        string,
        { address: string; bindings: { kafka: { partitions: number; replicas: number; topicConfiguration: Record<string, unknown> } } }
      >;
    };
    expect(Object.values(doc.channels).map((c) => c.address)).toEqual(['e', 'e.retry.1', 'e.retry.2', 'e.dlq', 'a']);
    expect(doc.channels.applied!.bindings.kafka.topicConfiguration['cleanup.policy']).toEqual(['compact']);
    expect(doc.channels.events!.bindings.kafka).toMatchObject({ partitions: 6, replicas: 3 });
  });
});
