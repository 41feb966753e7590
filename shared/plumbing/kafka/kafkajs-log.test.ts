import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { logLevel, type LogEntry } from 'kafkajs';
import protocolErrors from 'kafkajs/src/protocol/error.js';
import { pino } from 'pino';
import { expectedBrokerStates, kafkajsLogMethod, pinoLogCreator } from './kafkajs-log.ts';

const messageOf = (type: string) => protocolErrors.errorCodes.find((e) => e.type === type)!.message;

function entry(level: logLevel, message: string, extra: Record<string, unknown> = {}): Pick<LogEntry, 'level' | 'log'> {
  return { level, log: { timestamp: '2026-01-01T00:00:00.000Z', logger: 'kafkajs', message, ...extra } };
}

describe('kafkajsLogMethod', () => {
  it.each([
    // A fresh broker: the group coordinator is not there yet, then still loading its partition.
    [
      'coordinator loading (JoinGroup response)',
      entry(logLevel.ERROR, 'Response JoinGroup(key: 11, version: 5)', { error: messageOf('GROUP_LOAD_IN_PROGRESS') }),
      'info',
    ],
    [
      'coordinator not available (FindCoordinator response)',
      entry(logLevel.ERROR, 'Response FindCoordinator(key: 10, version: 2)', { error: messageOf('GROUP_COORDINATOR_NOT_AVAILABLE') }),
      'info',
    ],
    [
      'coordinator moved',
      entry(logLevel.ERROR, 'Response OffsetCommit(key: 8, version: 5)', { error: messageOf('NOT_COORDINATOR_FOR_GROUP') }),
      'info',
    ],
    [
      'leader election (Metadata response)',
      entry(logLevel.ERROR, 'Response Metadata(key: 3, version: 6)', { error: messageOf('LEADER_NOT_AVAILABLE') }),
      'info',
    ],
    [
      'rebalance (Heartbeat response)',
      entry(logLevel.ERROR, 'Response Heartbeat(key: 12, version: 3)', { error: messageOf('REBALANCE_IN_PROGRESS') }),
      'info',
    ],
    ['leader election (producer retry)', entry(logLevel.ERROR, `Failed to send messages: ${messageOf('LEADER_NOT_AVAILABLE')}`), 'info'],
    ['coordinator loading (seed broker retry)', entry(logLevel.ERROR, messageOf('GROUP_LOAD_IN_PROGRESS')), 'info'],
    // Failures stay errors.
    [
      'retries exhausted on an expected state',
      entry(logLevel.ERROR, `Crash: KafkaJSNumberOfRetriesExceeded: ${messageOf('GROUP_LOAD_IN_PROGRESS')}`),
      'error',
    ],
    ['restart after a crash', entry(logLevel.ERROR, 'Restarting the consumer in 300ms', { retryTime: 300 }), 'error'],
    [
      'not authorised',
      entry(logLevel.ERROR, 'Response Produce(key: 0, version: 7)', { error: messageOf('TOPIC_AUTHORIZATION_FAILED') }),
      'error',
    ],
    ['unknown topic on send', entry(logLevel.ERROR, `Failed to send messages: ${messageOf('UNKNOWN_TOPIC_OR_PARTITION')}`), 'error'],
    [
      'a connection refused',
      entry(logLevel.ERROR, 'Connection error: connect ECONNREFUSED 127.0.0.1:9092', { error: 'connect ECONNREFUSED 127.0.0.1:9092' }),
      'error',
    ],
    ['an error field that is not a string', entry(logLevel.ERROR, 'Error when calling eachMessage', { error: new Error('boom') }), 'error'],
    ['an Error as the message (the broker pool logs one)', entry(logLevel.ERROR, new Error('boom') as never), 'error'],
    // Other levels pass through unchanged.
    ['a warning', entry(logLevel.WARN, 'Consumer group received unsubscribed topics'), 'warn'],
    ['an expected state already at warn', entry(logLevel.WARN, `${messageOf('REBALANCE_IN_PROGRESS')}, resync group`), 'warn'],
    ['info', entry(logLevel.INFO, 'Consumer has joined the group'), 'info'],
    ['debug', entry(logLevel.DEBUG, 'Request Metadata(key: 3, version: 6)'), 'debug'],
  ])('%s -> %s', (_name, e, expected) => {
    expect(kafkajsLogMethod(e)).toBe(expected);
  });

  it("names only types of kafkajs's own protocol error table", () => {
    const types = new Set(protocolErrors.errorCodes.map((e) => e.type));
    for (const type of expectedBrokerStates) expect(types, type).toContain(type);
  });
});

describe('pinoLogCreator', () => {
  it('writes an expected broker state at info and a failure at error, with the namespace and fields', () => {
    const lines: Record<string, unknown>[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        lines.push(JSON.parse(chunk.toString()));
        done();
      },
    });
    const logger = pino({ level: 'info', formatters: { level: (label) => ({ level: label }) } }, sink);
    const log = pinoLogCreator(logger)(logLevel.WARN);
    log({
      namespace: 'Connection',
      label: 'ERROR',
      ...entry(logLevel.ERROR, 'Response JoinGroup(key: 11, version: 5)', { error: messageOf('GROUP_LOAD_IN_PROGRESS') }),
    });
    log({ namespace: 'Consumer', label: 'ERROR', ...entry(logLevel.ERROR, 'Crash: KafkaJSNonRetriableError: boom', { groupId: 'g' }) });
    expect(lines.map((l) => [l.level, l.kafkajs, l.msg])).toEqual([
      ['info', 'Connection', 'Response JoinGroup(key: 11, version: 5)'],
      ['error', 'Consumer', 'Crash: KafkaJSNonRetriableError: boom'],
    ]);
    expect(lines[0]!.error).toBe(messageOf('GROUP_LOAD_IN_PROGRESS'));
    expect(lines[1]!.groupId).toBe('g');
  });
});
