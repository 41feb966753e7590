import type { TestProject } from 'vitest/node';
import pg from 'pg';
import { migrate } from '#domain/store/migrate.ts';
import { LocalKafka, singleNodeDefaults } from '../infra/provision/kafka/local-kafka.ts';
import { resolvePostgres, withDatabase, canConnect } from '../infra/provision/postgres.ts';
import { dockerEngineAvailable } from '../infra/provision/docker.ts';
import { buildServices } from '../infra/dev/services.ts';
import { brokerReady, parseBrokers } from '#plumbing/kafka/client.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    kafkaBrokers: string;
    pgAdminUrl: string;
    pgTemplateDb: string;
  }
}

const log = (line: string) => console.error(`[global-setup] ${line}`);

async function setUpKafka(useDocker: boolean): Promise<{ brokers: string; stop: () => Promise<void> }> {
  if (process.env.KAFKA_BROKERS) {
    if (!(await brokerReady(parseBrokers(process.env.KAFKA_BROKERS)))) {
      throw new Error(`KAFKA_BROKERS=${process.env.KAFKA_BROKERS} is set but no broker answers there`);
    }
    return { brokers: process.env.KAFKA_BROKERS, stop: async () => {} };
  }
  if (useDocker) {
    const { GenericContainer, Wait } = await import('testcontainers');
    const { createServer } = await import('node:net');
    // The advertised listener must carry the host port, so pick a free one and bind it fixed.
    const hostPort = await new Promise<number>((resolve) => {
      const srv = createServer().listen(0, '127.0.0.1', () => {
        const p = (srv.address() as { port: number }).port;
        srv.close(() => resolve(p));
      });
    });
    const container = await new GenericContainer('apache/kafka:4.1.1')
      .withExposedPorts({ container: 9092, host: hostPort })
      .withEnvironment({
        KAFKA_NODE_ID: '1',
        KAFKA_PROCESS_ROLES: 'broker,controller',
        KAFKA_LISTENERS: 'PLAINTEXT://:9092,CONTROLLER://:9093',
        KAFKA_ADVERTISED_LISTENERS: `PLAINTEXT://127.0.0.1:${hostPort}`,
        KAFKA_LISTENER_SECURITY_PROTOCOL_MAP: 'PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT',
        KAFKA_CONTROLLER_LISTENER_NAMES: 'CONTROLLER',
        KAFKA_CONTROLLER_QUORUM_VOTERS: '1@localhost:9093',
        KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR: '1',
        KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR: '1',
        KAFKA_TRANSACTION_STATE_LOG_MIN_ISR: '1',
        KAFKA_SHARE_COORDINATOR_STATE_TOPIC_REPLICATION_FACTOR: '1',
        KAFKA_SHARE_COORDINATOR_STATE_TOPIC_MIN_ISR: '1',
        KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS: '0',
        KAFKA_AUTO_CREATE_TOPICS_ENABLE: 'false',
      })
      .withWaitStrategy(Wait.forLogMessage(/Kafka Server started/))
      .start();
    const brokers = `127.0.0.1:${hostPort}`;
    return {
      brokers,
      stop: async () => {
        await container.stop();
      },
    };
  }
  const kafka = new LocalKafka({ ...singleNodeDefaults, log });
  const t0 = Date.now();
  const { started } = await kafka.start();
  log(`${started.length ? 'started' : 'reused'} local Kafka at ${kafka.brokers.join(',')} in ${Date.now() - t0} ms`);
  return { brokers: kafka.brokers.join(','), stop: () => kafka.stop() };
}

async function setUpPostgres(useDocker: boolean): Promise<{ adminUrl: string; stop: () => Promise<void> }> {
  if (!process.env.DATABASE_URL && useDocker) {
    const { GenericContainer, Wait } = await import('testcontainers');
    const container = await new GenericContainer('postgres:17')
      .withEnvironment({ POSTGRES_HOST_AUTH_METHOD: 'trust' })
      .withExposedPorts(5432)
      .withWaitStrategy(Wait.forLogMessage(/database system is ready to accept connections/, 2))
      .start();
    const adminUrl = `postgres://postgres@127.0.0.1:${container.getMappedPort(5432)}/postgres`;
    return {
      adminUrl,
      stop: async () => {
        await container.stop();
      },
    };
  }
  const resolved = await resolvePostgres(log);
  return { adminUrl: resolved.adminUrl, stop: resolved.stop };
}

// A missing service throws here, which fails the whole run: integration tests are never skipped.
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const useDocker = (!process.env.KAFKA_BROKERS || !process.env.DATABASE_URL) && dockerEngineAvailable();
  // The services' bundles too: tests start the services the way npm start does, from them.
  const [kafka, postgres] = await Promise.all([setUpKafka(useDocker), setUpPostgres(useDocker), buildServices()]);

  // Every test file clones this migrated template, so each file gets its own database.
  const templateDb = `bridge_tpl_${process.pid}`;
  const admin = new pg.Client({ connectionString: postgres.adminUrl });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS ${templateDb} WITH (FORCE)`);
  await admin.query(`CREATE DATABASE ${templateDb}`);
  const pool = new pg.Pool({ connectionString: withDatabase(postgres.adminUrl, templateDb), max: 1 });
  await migrate(pool);
  await pool.end();
  if (!(await canConnect(withDatabase(postgres.adminUrl, templateDb)))) throw new Error('template database unreachable');

  project.provide('kafkaBrokers', kafka.brokers);
  project.provide('pgAdminUrl', postgres.adminUrl);
  project.provide('pgTemplateDb', templateDb);

  return async () => {
    await admin.query(`DROP DATABASE IF EXISTS ${templateDb} WITH (FORCE)`).catch(() => {});
    await admin.end();
    await kafka.stop();
    await postgres.stop();
  };
}
