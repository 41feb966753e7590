export {
  createRelayPool,
  createRelayProducer,
  OutboxRelay,
  RELAY_BATCH_BYTES,
  RELAY_TRANSACTION_LANES,
  relayParts,
  STOP_DRAIN_MS,
  type Leadership,
  type OutboxRelayOptions,
  type RelayHandle,
  type RelayPartsSettings,
} from './outbox-relay.ts';
export { RelayLeadership, type RelayLeadershipOptions } from './leadership.ts';
