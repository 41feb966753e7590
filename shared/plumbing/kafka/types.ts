// The client library's types that code outside this folder names. Only this folder imports kafkajs
// (an eslint rule holds it, infra/repo/layers.test.ts proves it bites), so replacing the client is a change
// here: these are the shapes a replacement has to provide, or the callers that must change with it.
export type {
  Admin,
  Consumer,
  EachBatchPayload,
  ISocketFactory,
  Kafka,
  KafkaMessage,
  Message,
  Producer,
  ProducerRecord,
  RecordMetadata,
  Transaction,
} from 'kafkajs';
