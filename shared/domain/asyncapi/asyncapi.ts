import { z } from 'zod';
import {
  APPLIED_HEADER_EVENT_ID,
  APPLIED_HEADER_SOURCE_OFFSET,
  APPLIED_HEADER_SOURCE_PARTITION,
  APPLIED_HEADER_SOURCE_TOPIC,
} from '#domain/apply/index.ts';
import { appliedRecordSchema } from '#domain/contract/applied-record-schema.ts';
import { eventEnvelopeSchema } from '#domain/contract/envelope.ts';
import { EVENT_HEADERS } from '#domain/contract/event-headers.ts';
import { DLQ_HEADERS, RETRY_HEADERS } from '#domain/failures/index.ts';
import { REPLAYED_FROM_HEADER } from '#domain/operations/dlq-records.ts';
import { DEFAULTS } from '#plumbing/config/defaults.ts';
import { topicSpecs, type TopicSettings, type TopicSpec } from '#plumbing/kafka/topics.ts';

// The AsyncAPI 3 document of every topic the bridge writes (events, retry levels, DLQ, applied),
// generated from the same sources of truth the code uses: the topic specs, the header names and
// the zod schemas (as the JSON Schemas are). docs/asyncapi.json is its output; a unit test fails
// when the committed file differs (npm run asyncapi writes it) and validates it with @asyncapi/parser.

const KAFKA_BINDING_VERSION = '0.5.0';

/** AsyncAPI's schema format is a JSON Schema draft 7 superset: zod renders into it directly. */
function schemaOf(schema: z.ZodType): Record<string, unknown> {
  const { $schema: _ignored, ...rest } = z.toJSONSchema(schema, { target: 'draft-7', io: 'input' }) as Record<string, unknown>;
  return rest;
}

function headers(names: Record<string, string>, required: string[] = []): Record<string, unknown> {
  return {
    type: 'object',
    properties: Object.fromEntries(Object.entries(names).map(([name, description]) => [name, { type: 'string', description }])),
    ...(required.length > 0 ? { required } : {}),
  };
}

const eventHeaderDocs: Record<string, string> = {
  [EVENT_HEADERS.eventId]: 'The envelope event_id',
  [EVENT_HEADERS.source]: 'The webhook source (provider) id the request was verified for, or "reconcile" for a pulled snapshot',
  [EVENT_HEADERS.receivedAt]: 'When the ingress received it (ISO 8601)',
  [EVENT_HEADERS.secretId]: "Which of the source's secrets verified the signature (absent for a pulled snapshot)",
  [EVENT_HEADERS.bodySha256]: 'SHA-256 of the raw body, hex',
  [EVENT_HEADERS.eventType]: 'The envelope event_type',
  [EVENT_HEADERS.idempotencyKey]: 'The envelope idempotency_key, when it has one',
  [EVENT_HEADERS.deliveryAttempt]: "The provider's attempt number (X-Webhook-Retry), when it sent one",
  [EVENT_HEADERS.orderedBy]:
    '"occurred_at" when the source orders this resource type by occurred_at (the worker then compares times, not versions); absent: by version',
  [EVENT_HEADERS.reconcileTrigger]: 'Why a snapshot was pulled from the provider (gap, unseen, quarantine, operator)',
  [EVENT_HEADERS.traceparent]: 'W3C trace context of the ingress publish span (when tracing is on)',
  [EVENT_HEADERS.tracestate]: 'W3C trace state, carried on with traceparent',
};
const eventHeaderRequired = [
  EVENT_HEADERS.eventId,
  EVENT_HEADERS.source,
  EVENT_HEADERS.receivedAt,
  EVENT_HEADERS.bodySha256,
  EVENT_HEADERS.eventType,
];

const retryHeaderDocs: Record<string, string> = {
  [RETRY_HEADERS.attempt]: 'Attempts made so far, all failed (1 on retry.1)',
  [RETRY_HEADERS.firstFailureAt]: 'When the first attempt failed (ISO 8601)',
  [RETRY_HEADERS.lastErrorCode]: 'The last failure code',
  [RETRY_HEADERS.lastErrorMessage]: 'The last failure message (truncated)',
  [RETRY_HEADERS.originalTopic]: 'Where the event was first consumed',
  [RETRY_HEADERS.originalPartition]: 'Its partition there',
  [RETRY_HEADERS.originalOffset]: 'Its offset there',
  [RETRY_HEADERS.notBefore]: 'The retry consumer leaves it until this time (ISO 8601)',
};
const dlqHeaderDocs: Record<string, string> = {
  [DLQ_HEADERS.reason]: 'Why it is here: a failure code (invalid_envelope, quarantined, ...) or retries_exhausted',
  [DLQ_HEADERS.deadLetteredAt]: 'When it was dead-lettered (ISO 8601)',
  [DLQ_HEADERS.failedTopic]: 'The topic it was consumed from when it was dead-lettered',
  [REPLAYED_FROM_HEADER]: 'On a record replayed from the DLQ: where in the DLQ it came from',
};
const appliedHeaderDocs: Record<string, string> = {
  [APPLIED_HEADER_EVENT_ID]: 'The event that made this change',
  [APPLIED_HEADER_SOURCE_TOPIC]: 'Where the worker consumed the event',
  [APPLIED_HEADER_SOURCE_PARTITION]: 'Its partition there',
  [APPLIED_HEADER_SOURCE_OFFSET]: 'Its offset there',
  ce_specversion: 'CloudEvents (Kafka binding, binary content mode): 1.0',
  ce_id: 'CloudEvents id: the event id',
  ce_source: 'CloudEvents source: /theme-bridge/tenants/<tenant_id>',
  ce_type: 'CloudEvents type: <resource type>.upserted or <resource type>.deleted',
  ce_subject: 'CloudEvents subject: the record key',
  ce_time: "CloudEvents time: the provider's occurred_at",
  'content-type': 'application/json',
  [EVENT_HEADERS.traceparent]: 'W3C trace context of the apply span that made this change (when tracing is on): continue it downstream',
  [EVENT_HEADERS.tracestate]: 'W3C trace state, carried on with traceparent',
};

const resourceKey = {
  type: 'string',
  description: '<tenant_id>/<resource type>/<resource id>: every record of one resource on one partition, in order',
};

function kafkaChannel(spec: TopicSpec, description: string, message: string, replicas: number) {
  const cleanup = spec.configs['cleanup.policy'] ?? 'delete';
  return {
    address: spec.name,
    description,
    messages: { [message]: { $ref: `#/components/messages/${message}` } },
    bindings: {
      kafka: {
        topic: spec.name,
        partitions: spec.partitions,
        replicas,
        topicConfiguration: {
          'cleanup.policy': [cleanup],
          ...(spec.configs['retention.ms'] === undefined ? {} : { 'retention.ms': Number(spec.configs['retention.ms']) }),
          ...(spec.configs['min.insync.replicas'] === undefined
            ? {}
            : { 'min.insync.replicas': Number(spec.configs['min.insync.replicas']) }),
        },
        bindingVersion: KAFKA_BINDING_VERSION,
      },
    },
  };
}

export function renderAsyncApi(settings: TopicSettings = { ...DEFAULTS.topics }, version = '0.1.0'): Record<string, unknown> {
  const [events, ...rest] = topicSpecs(settings);
  const applied = rest.pop()!;
  const dlq = rest.pop()!;
  const retries = rest;
  const channels: Record<string, unknown> = {
    events: kafkaChannel(
      events!,
      'Verified webhooks, the raw body byte for byte, keyed by resource. Written by the ingress (and by reconciliation); read by the worker.',
      'webhookEvent',
      settings.replicationFactor,
    ),
    ...Object.fromEntries(
      retries.map((spec, i) => [
        `retry${i + 1}`,
        kafkaChannel(
          spec,
          `Retry level ${i + 1}: events whose apply failed transiently, consumed again once due (retry-not-before).`,
          'retryEvent',
          settings.replicationFactor,
        ),
      ]),
    ),
    dlq: kafkaChannel(
      dlq,
      'Dead letters: permanent failures and exhausted retries, with why; replayed by an operator (bridge dlq replay, the console).',
      'deadLetter',
      settings.replicationFactor,
    ),
    applied: kafkaChannel(
      applied,
      'Every applied change, from the transactional outbox relay (read it read_committed). Compacted: the latest record per resource stays; a delete is a record with data null.',
      'appliedRecord',
      settings.replicationFactor,
    ),
  };
  const ref = (channel: string) => ({ $ref: `#/channels/${channel}` });
  const operations: Record<string, unknown> = {
    ingressPublishesEvent: {
      action: 'send',
      channel: ref('events'),
      summary: 'The ingress publishes a verified webhook once it has checked its signature and envelope (202 after the broker ack).',
    },
    workerAppliesEvent: {
      action: 'receive',
      channel: ref('events'),
      summary: 'The worker applies snapshots to Postgres with a version check and deduplication.',
    },
    ...Object.fromEntries(
      retries.map((_, i) => [
        `workerRetriesEvent${i + 1}`,
        { action: 'receive', channel: ref(`retry${i + 1}`), summary: `The retry consumer of level ${i + 1} applies what is due.` },
      ]),
    ),
    workerDeadLetters: {
      action: 'send',
      channel: ref('dlq'),
      summary: 'The failure router dead-letters a permanent failure or an exhausted retry.',
    },
    relayPublishesApplied: {
      action: 'send',
      channel: ref('applied'),
      summary: 'The outbox relay publishes every applied change, in commit order, in Kafka transactions.',
    },
    downstreamReadsApplied: {
      action: 'receive',
      channel: ref('applied'),
      summary: 'Downstream teams build state from the applied topic (isolation.level=read_committed).',
    },
  };
  const envelope = { $ref: '#/components/schemas/EventEnvelope' };
  return {
    asyncapi: '3.0.0',
    info: {
      title: 'theme-bridge',
      version,
      description:
        'Webhook-to-Kafka bridge: verified webhooks become correct, replayable state. Topic names are the defaults (TOPIC_EVENTS, TOPIC_APPLIED, TOPIC_RETRY_LEVELS change them). Generated by npm run asyncapi from the code.',
    },
    defaultContentType: 'application/json',
    servers: {
      local: {
        host: DEFAULTS.dev.kafkaBrokers,
        protocol: 'kafka',
        description: 'The broker npm start runs (Apache Kafka, KRaft, one node).',
      },
    },
    channels,
    operations,
    components: {
      schemas: { EventEnvelope: schemaOf(eventEnvelopeSchema), AppliedRecord: schemaOf(appliedRecordSchema) },
      messages: {
        webhookEvent: {
          name: 'webhookEvent',
          title: 'A verified webhook',
          contentType: 'application/json',
          headers: headers(eventHeaderDocs, eventHeaderRequired),
          payload: envelope,
          bindings: { kafka: { key: resourceKey, bindingVersion: KAFKA_BINDING_VERSION } },
        },
        retryEvent: {
          name: 'retryEvent',
          title: 'A webhook waiting for another attempt',
          contentType: 'application/json',
          headers: headers({ ...eventHeaderDocs, ...retryHeaderDocs }, [
            ...eventHeaderRequired,
            RETRY_HEADERS.attempt,
            RETRY_HEADERS.notBefore,
          ]),
          payload: envelope,
          bindings: { kafka: { key: resourceKey, bindingVersion: KAFKA_BINDING_VERSION } },
        },
        deadLetter: {
          name: 'deadLetter',
          title: 'A dead letter',
          description: 'The original bytes (possibly not a valid envelope: that may be why it is here), the original headers and why.',
          headers: headers({ ...eventHeaderDocs, ...retryHeaderDocs, ...dlqHeaderDocs }, [DLQ_HEADERS.reason, DLQ_HEADERS.deadLetteredAt]),
          payload: { description: 'The raw body as the provider sent it' },
          bindings: {
            kafka: {
              key: { ...resourceKey, description: `${resourceKey.description} (absent when the body had no valid resource)` },
              bindingVersion: KAFKA_BINDING_VERSION,
            },
          },
        },
        appliedRecord: {
          name: 'appliedRecord',
          title: 'An applied change',
          contentType: 'application/json',
          headers: headers(appliedHeaderDocs, [
            APPLIED_HEADER_EVENT_ID,
            'ce_specversion',
            'ce_id',
            'ce_source',
            'ce_type',
            'ce_subject',
            'ce_time',
          ]),
          payload: { $ref: '#/components/schemas/AppliedRecord' },
          bindings: { kafka: { key: resourceKey, bindingVersion: KAFKA_BINDING_VERSION } },
        },
      },
    },
  };
}

export function renderAsyncApiFile(version?: string): string {
  return `${JSON.stringify(renderAsyncApi(undefined, version), null, 2)}\n`;
}
