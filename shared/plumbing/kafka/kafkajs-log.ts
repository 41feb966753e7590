import { logLevel, type LogEntry, type logCreator } from 'kafkajs';
import protocolErrors from 'kafkajs/src/protocol/error.js';
import type { Logger } from '#plumbing/logging/logger.ts';

export type LogMethod = 'error' | 'warn' | 'info' | 'debug';

const levelNames: Record<number, LogMethod> = {
  [logLevel.ERROR]: 'error',
  [logLevel.WARN]: 'warn',
  [logLevel.INFO]: 'info',
  [logLevel.DEBUG]: 'debug',
};

/**
 * Broker answers that are states a cluster passes through, not failures: a coordinator still
 * loading or moving, a partition between leaders, a group rebalancing. kafkajs logs each failed
 * response at error level and then retries or re-joins; if its retries run out it says so in a
 * `Crash` line of its own, which stays an error.
 */
export const expectedBrokerStates: ReadonlySet<string> = new Set([
  'GROUP_LOAD_IN_PROGRESS',
  'GROUP_COORDINATOR_NOT_AVAILABLE',
  'NOT_COORDINATOR_FOR_GROUP',
  'LEADER_NOT_AVAILABLE',
  'REBALANCE_IN_PROGRESS',
]);

// kafkajs's log entries carry a protocol error's message only, not its type; its own table of
// protocol errors turns the message back into the type.
const typeByMessage = new Map(protocolErrors.errorCodes.map((e) => [e.message, e.type]));

// The producer's retry line wraps the broker's message.
const SEND_RETRY_PREFIX = 'Failed to send messages: ';

/** The protocol error type an error-level kafkajs entry reports, if it reports one. */
export function protocolErrorTypeOf(log: LogEntry['log']): string | undefined {
  const { message, error } = log;
  if (typeof error === 'string') return typeByMessage.get(error);
  // Not always a string: one of kafkajs's broker-pool lines logs the Error itself.
  if (typeof message !== 'string') return undefined;
  if (message.startsWith(SEND_RETRY_PREFIX)) return typeByMessage.get(message.slice(SEND_RETRY_PREFIX.length));
  return typeByMessage.get(message);
}

/** The pino level for a kafkajs entry: its own, except that an expected broker state is info. */
export function kafkajsLogMethod(entry: Pick<LogEntry, 'level' | 'log'>): LogMethod {
  const method = levelNames[entry.level] ?? 'info';
  if (method !== 'error') return method;
  const type = protocolErrorTypeOf(entry.log);
  return type !== undefined && expectedBrokerStates.has(type) ? 'info' : 'error';
}

// kafkajs logs go through pino so one log pipeline explains an incident.
export function pinoLogCreator(logger: Logger): logCreator {
  return () => (entry) => {
    const { message, ...extra } = entry.log;
    logger[kafkajsLogMethod(entry)]({ kafkajs: entry.namespace, ...extra }, message);
  };
}
