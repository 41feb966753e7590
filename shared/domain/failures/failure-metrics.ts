import { Counter, Gauge, type Registry } from 'prom-client';

export interface FailureMetrics {
  retries: Counter<'attempt'>;
  deadLetters: Counter<'reason'>;
  failures: Counter<'class' | 'code'>;
  staleOnFailure: Counter;
  retryTopicLag: Gauge<'topic'>;
  retryWaiting: Gauge;
  consumerPaused: Gauge<'consumer'>;
  outagePauses: Counter<'consumer'>;
}

/** Metrics write to the registry they are given; each service owns its registry. */
export function createFailureMetrics(registry: Registry): FailureMetrics {
  const registers = [registry];
  return {
    retries: new Counter({
      name: 'webhook_retries_total',
      help: 'Events sent to a retry topic, by retry number (1 = retry.1, the second attempt)',
      labelNames: ['attempt'],
      registers,
    }),
    deadLetters: new Counter({
      name: 'dead_letter_total',
      help: 'Events produced to the DLQ, by reason code',
      labelNames: ['reason'],
      registers,
    }),
    failures: new Counter({
      name: 'webhook_failures_total',
      help: 'Failed apply attempts, by class (permanent, transient, outage) and code',
      labelNames: ['class', 'code'],
      registers,
    }),
    staleOnFailure: new Counter({
      name: 'webhook_failures_resolved_stale_total',
      help: 'Failed events not retried or dead-lettered because their resource already holds that version or a later one',
      registers,
    }),
    retryTopicLag: new Gauge({
      name: 'webhook_retry_topic_lag',
      help: 'Records in each retry topic not yet processed by its retry consumer group',
      labelNames: ['topic'],
      registers,
    }),
    retryWaiting: new Gauge({
      name: 'webhook_retry_waiting_events',
      help: 'Events waiting in the retry chain (sum of the retry topics lag)',
      registers,
    }),
    consumerPaused: new Gauge({
      name: 'webhook_consumer_paused',
      help: '1 while a consumer is paused by an infrastructure outage',
      labelNames: ['consumer'],
      registers,
    }),
    outagePauses: new Counter({
      name: 'webhook_outage_pauses_total',
      help: 'Times a consumer paused for an infrastructure outage',
      labelNames: ['consumer'],
      registers,
    }),
  };
}
