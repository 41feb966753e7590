// The operator console in tests: its config on a test's database and topics.
import type { TopicNames } from '#plumbing/kafka/topics.ts';
import type { ConsoleConfig } from '#services/console/config.ts';
import type { Harness } from './harness.ts';
import { testBrokers } from './kafka.ts';

/**
 * A console on the test broker, listening on a free loopback port, for a database, a topic set and
 * a group; `over` adds or changes the rest. Its ingress metrics page is where nothing listens
 * unless `over` names one.
 */
export function consoleTestConfig(
  input: { databaseUrl: string; names: TopicNames; group: string } & Partial<ConsoleConfig>,
): ConsoleConfig {
  return {
    port: 0,
    host: '127.0.0.1',
    operatorToken: undefined,
    brokers: testBrokers(),
    statementTimeoutMs: 10_000,
    ingressMetricsUrl: 'http://127.0.0.1:9/metrics',
    logLevel: 'silent',
    ...input,
  };
}

/** consoleTestConfig on a harness: its database, topics, group and ingress metrics. */
export function harnessConsoleConfig(h: Harness, over: Partial<ConsoleConfig> = {}): ConsoleConfig {
  return consoleTestConfig({
    databaseUrl: h.db.url,
    names: h.names,
    group: h.groupId,
    ingressMetricsUrl: `${h.ingress.adminUrl}/metrics`,
    ...over,
  });
}
