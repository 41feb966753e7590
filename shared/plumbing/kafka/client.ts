import net from 'node:net';
import { Kafka, logLevel, type ISocketFactory, type KafkaConfig } from 'kafkajs';
import type { Logger } from '#plumbing/logging/logger.ts';
import { pinoLogCreator } from './kafkajs-log.ts';

export interface KafkaClientSettings {
  brokers: string[];
  clientId: string;
  logger: Logger;
  connectionTimeoutMs?: number;
  requestTimeoutMs?: number;
  /** kafkajs retry count for connection and request failures; short-lived tools want few. */
  retries?: number;
  /** How a connection to a broker is opened; by default a direct TCP socket without Nagle's delay. */
  socketFactory?: ISocketFactory;
}

export function parseBrokers(value: string): string[] {
  return value
    .split(',')
    .map((b) => b.trim())
    .filter((b) => b.length > 0);
}

// kafkajs's own factory leaves Nagle's algorithm on; small produce requests then wait for the
// broker's delayed ACK. Request/response traffic wants TCP_NODELAY, as the Java client sets it.
export const noDelaySocketFactory: ISocketFactory = ({ host, port, onConnect }) => {
  const socket = net.connect({ host, port, noDelay: true }, onConnect);
  socket.setKeepAlive(true, 60_000);
  return socket;
};

// With brokerReady, the only place kafkajs is constructed, so the client library can be swapped in one module.
export function createKafka(settings: KafkaClientSettings): Kafka {
  const config: KafkaConfig = {
    clientId: settings.clientId,
    brokers: settings.brokers,
    connectionTimeout: settings.connectionTimeoutMs ?? 3000,
    requestTimeout: settings.requestTimeoutMs ?? 10000,
    socketFactory: settings.socketFactory ?? noDelaySocketFactory,
    logLevel: logLevel.WARN,
    logCreator: pinoLogCreator(settings.logger.child({ component: 'kafkajs' })),
    retry: { initialRetryTime: 100, retries: settings.retries ?? 8, maxRetryTime: 5000 },
  };
  return new Kafka(config);
}

/** Ready means an admin call succeeds, not merely an open port. Silent: tooling polls it while a broker starts. */
export async function brokerReady(brokers: string[], expectedBrokers = 1): Promise<boolean> {
  const kafka = new Kafka({
    clientId: 'bridge-infra-probe',
    brokers,
    logLevel: logLevel.NOTHING,
    connectionTimeout: 1000,
    requestTimeout: 3000,
    retry: { retries: 0 },
  });
  const admin = kafka.admin();
  try {
    await admin.connect();
    const cluster = await admin.describeCluster();
    return cluster.brokers.length >= expectedBrokers && cluster.controller !== null;
  } catch {
    return false;
  } finally {
    await admin.disconnect().catch(() => {});
  }
}
