export { OutboxRelay, type OutboxRelayOptions, type RelayHandle } from './outbox-relay.ts';
export { RELAY_BATCH_BYTES, type Leadership } from './pass.ts';
export { createRelayPool, createRelayProducer, relayParts, RELAY_TRANSACTION_LANES, type RelayPartsSettings } from './parts.ts';
export { RelayLeadership, type RelayLeadershipOptions } from './leadership.ts';
export { STOP_DRAIN_MS } from './stop-drain.ts';
