import { z } from 'zod';
import { DEFAULTS } from '#plumbing/config/defaults.ts';
import { ConfigError, databaseEnv, kafkaEnv, logEnv, parseConfig, portSchema, topicEnv, topicSettingsFrom } from '#plumbing/config/env.ts';
import { topicNames, type TopicNames } from '#plumbing/kafka/topics.ts';
import { keyringFromEnv, SecretKeyError, type SecretKeyring } from '#domain/sources/secret-box.ts';
import { isLoopbackHost } from './client-address.ts';

const consoleEnv = z
  .object({
    CONSOLE_PORT: portSchema.default(DEFAULTS.consolePort),
    /** Loopback unless configured: the console shows event bodies and can replay. */
    CONSOLE_HOST: z.string().min(1).default('127.0.0.1'),
    /** Unset: the console only reads; every action is disabled. */
    CONSOLE_OPERATOR_TOKEN: z.string().min(16, 'CONSOLE_OPERATOR_TOKEN must be at least 16 characters').optional(),
    CONSUMER_GROUP: z.string().min(1).default(DEFAULTS.consumerGroup),
    /** The ingress's metrics, for answers by status code; default its admin port on this host. */
    INGRESS_METRICS_URL: z.url().optional(),
    INGRESS_ADMIN_PORT: portSchema.default(DEFAULTS.adminPort.ingress),
    /** The sources file (as the worker's and the CLI's): the resource page's Reconcile uses its `reconcile` settings. */
    WEBHOOK_SOURCES_FILE: z.string().min(1).optional(),
    /** postgres: the resource page's Reconcile follows the sources in Postgres, as the workers do. */
    SOURCES_FROM: z.enum(['file', 'postgres']).default('file'),
    /** Host names (besides the loopback ones) a browser may use to reach the console: a DNS-rebinding guard. */
    CONSOLE_ALLOWED_HOSTS: z.string().default(''),
    /** Sign-in to read as well as to act; unset: on whenever CONSOLE_HOST is not a loopback address. */
    CONSOLE_SIGN_IN_TO_READ: z.stringbool().optional(),
    /** Browsers reach the console over HTTPS (a TLS proxy in front): Secure cookie, https Origin; required beyond loopback. */
    CONSOLE_HTTPS: z.stringbool().default(false),
    /** Set by infra/dev/dev.env: the public dev operator token is accepted (on loopback only). */
    CONSOLE_DEV: z.stringbool().default(false),
    /** Warn about dead letters this many days before the DLQ topic's retention deletes them. */
    CONSOLE_DLQ_EXPIRY_WARNING_DAYS: z.coerce.number().positive().default(7),
    /** The keys sources' secrets are sealed with (id:base64key,...): the operator API's writes need them. */
    BRIDGE_SECRET_KEYS: z.string().optional(),
    /** Which of BRIDGE_SECRET_KEYS seals new secrets; default the first. */
    BRIDGE_SECRET_KEY_ID: z.string().optional(),
  })
  .and(kafkaEnv)
  .and(databaseEnv)
  .and(topicEnv)
  .and(logEnv);

export interface ConsoleConfig {
  port: number;
  host: string;
  operatorToken: string | undefined;
  brokers: string[];
  databaseUrl: string;
  statementTimeoutMs: number;
  names: TopicNames;
  group: string;
  ingressMetricsUrl: string;
  logLevel: string;
  /** LOG_BUFFER_BYTES (stdoutDestination). */
  logBufferBytes?: number;
  /** WEBHOOK_SOURCES_FILE; unset: no Reconcile on the resource page (it says why). */
  sourcesFile?: string | undefined;
  /** SOURCES_FROM: postgres follows the sources in the database (live) instead of sourcesFile. */
  sourcesFrom?: 'file' | 'postgres';
  /** Host names a request may name besides the loopback ones (CONSOLE_ALLOWED_HOSTS). */
  allowedHosts?: string[];
  /** Reading needs a signed-in operator too (default: when not on loopback). */
  signInToRead?: boolean;
  /** Served over HTTPS by a proxy in front (CONSOLE_HTTPS). */
  https?: boolean;
  /** How long before a dead letter's deletion the console warns (CONSOLE_DLQ_EXPIRY_WARNING_DAYS). */
  dlqExpiryWarningMs?: number;
  /** BRIDGE_SECRET_KEYS; unset: the operator API reads sources but refuses writes that need a secret (503). */
  secretKeyring?: SecretKeyring | undefined;
}

export const DEFAULT_DLQ_EXPIRY_WARNING_MS = 7 * 24 * 3600 * 1000;

/** The public token infra/dev/dev.env gives `npm start`: anyone can read it in the repository. */
export const PUBLIC_DEV_OPERATOR_TOKEN = 'dev-operator-token-change-me';

export function consoleConfigFrom(env: Record<string, string | undefined>): ConsoleConfig {
  const c = parseConfig(consoleEnv, env);
  const loopback = isLoopbackHost(c.CONSOLE_HOST);
  const signInToRead = c.CONSOLE_SIGN_IN_TO_READ ?? !loopback;
  const problems: string[] = [];
  // Anyone who has read the repository knows the dev token: it opens a console on this machine only.
  if (c.CONSOLE_OPERATOR_TOKEN === PUBLIC_DEV_OPERATOR_TOKEN && !(loopback && c.CONSOLE_DEV))
    problems.push(
      'CONSOLE_OPERATOR_TOKEN is the public dev token from infra/dev/dev.env: it is accepted only with CONSOLE_DEV=true on a loopback CONSOLE_HOST; set a token of your own',
    );
  if (signInToRead && c.CONSOLE_OPERATOR_TOKEN === undefined)
    problems.push(
      `CONSOLE_HOST ${c.CONSOLE_HOST} is not loopback, so reading needs a sign-in: set CONSOLE_OPERATOR_TOKEN (or CONSOLE_SIGN_IN_TO_READ=false to leave the pages open)`,
    );
  // Beyond loopback the sign-in carries the operator token and every request the session cookie;
  // over plain HTTP anyone on the path reads both. The console speaks no TLS itself, so a proxy in
  // front must end it, and CONSOLE_HTTPS=true is the operator saying so.
  if (!loopback && !c.CONSOLE_HTTPS)
    problems.push(
      `CONSOLE_HOST ${c.CONSOLE_HOST} is not loopback and the console speaks plain HTTP: put a TLS-terminating proxy in front of it and set CONSOLE_HTTPS=true, or bind a loopback CONSOLE_HOST`,
    );
  let secretKeyring: SecretKeyring | undefined;
  try {
    secretKeyring = keyringFromEnv(env);
  } catch (error) {
    if (!(error instanceof SecretKeyError)) throw error;
    problems.push(error.message);
  }
  if (problems.length > 0) throw new ConfigError(problems);
  return {
    port: c.CONSOLE_PORT,
    host: c.CONSOLE_HOST,
    operatorToken: c.CONSOLE_OPERATOR_TOKEN,
    brokers: c.KAFKA_BROKERS,
    databaseUrl: c.DATABASE_URL,
    statementTimeoutMs: c.DATABASE_STATEMENT_TIMEOUT_MS,
    names: topicNames(topicSettingsFrom(c)),
    group: c.CONSUMER_GROUP,
    ingressMetricsUrl: c.INGRESS_METRICS_URL ?? `http://127.0.0.1:${c.INGRESS_ADMIN_PORT}/metrics`,
    logLevel: c.LOG_LEVEL,
    logBufferBytes: c.LOG_BUFFER_BYTES,
    sourcesFile: c.WEBHOOK_SOURCES_FILE,
    sourcesFrom: c.SOURCES_FROM,
    allowedHosts: c.CONSOLE_ALLOWED_HOSTS.split(',')
      .map((h) => h.trim())
      .filter((h) => h !== ''),
    signInToRead,
    https: c.CONSOLE_HTTPS,
    dlqExpiryWarningMs: c.CONSOLE_DLQ_EXPIRY_WARNING_DAYS * 24 * 3600 * 1000,
    secretKeyring,
  };
}
