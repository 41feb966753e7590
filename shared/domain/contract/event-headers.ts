// Headers of a record on the events topic: written by the ingress, read by the worker and the
// CLI. The raw body stays untouched; what the ingress learnt about the delivery travels here.
export const EVENT_HEADERS = {
  eventId: 'event-id',
  source: 'source',
  receivedAt: 'received-at',
  secretId: 'secret-id',
  bodySha256: 'body-sha256',
  eventType: 'event-type',
  idempotencyKey: 'idempotency-key',
  /** The provider's attempt number (X-Webhook-Retry), when it sent one. */
  deliveryAttempt: 'delivery-attempt',
} as const;
