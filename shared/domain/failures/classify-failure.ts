import { BridgeError, DB_OUTAGE_CODES, type ErrorCode } from '#plumbing/errors/bridge-error.ts';
import { isDeadLetter } from './dead-letter.ts';
import { SQLSTATE, SQLSTATE_CLASS, sqlstateOf } from './sqlstate.ts';

/**
 * permanent: retrying cannot help, so the event goes to the DLQ at once.
 * transient: this one event failed; a later attempt (next retry topic) can succeed.
 * outage:    the infrastructure is down for every event; pause the consumer, never route.
 */
export type FailureClass = 'permanent' | 'transient' | 'outage';

/** A BridgeError code, or `sqlstate_<code>` for a Postgres error no rule below names. */
export type FailureCode = ErrorCode | `sqlstate_${string}`;

export interface ClassifiedFailure {
  class: FailureClass;
  /** Stable, low-cardinality code: a metric label, a header value, an inbox reason. */
  code: FailureCode;
  message: string;
  sqlstate?: string;
}

/** Parse and contract failures (shared/domain/contract parseEvent codes) and other codes known to be final. */
export const PERMANENT_CODES: ReadonlySet<FailureCode> = new Set<ErrorCode>([
  'invalid_utf8',
  'invalid_json',
  'too_deep',
  'forbidden_key',
  'invalid_string',
  'invalid_envelope',
  'unknown_event_version',
  'invalid_data',
  'quarantined',
  // An event of the other ordering than its resource's: only an operator's switch changes that.
  'ordering_mismatch',
  'constraint_violation',
  'data_exception',
  'invalid_retry_headers',
  'missing_key',
]);

/** Codes a BridgeError can carry to say "the infrastructure is down", not this event. */
export const OUTAGE_CODES: ReadonlySet<FailureCode> = new Set<ErrorCode>(DB_OUTAGE_CODES);

const TRANSIENT_SQLSTATES: Readonly<Record<string, ErrorCode>> = {
  [SQLSTATE.serializationFailure]: 'serialization_failure',
  [SQLSTATE.deadlockDetected]: 'deadlock_detected',
};

// A lock or statement timeout says the database is not serving this work now (a stuck session
// holds the lock, the server is overloaded), not that the event is bad: routing it down the retry
// chain would dead-letter it within minutes. The consumer pauses and probes, as for an outage.
const OUTAGE_SQLSTATES: Readonly<Record<string, ErrorCode>> = {
  [SQLSTATE.lockNotAvailable]: 'lock_timeout',
  [SQLSTATE.queryCanceled]: 'statement_timeout',
  [SQLSTATE.adminShutdown]: 'db_shutdown',
  [SQLSTATE.crashShutdown]: 'db_shutdown',
  [SQLSTATE.cannotConnectNow]: 'db_shutdown',
  [SQLSTATE.tooManyConnections]: 'pool_exhausted',
  [SQLSTATE.invalidCatalogName]: 'db_missing',
};

const OUTAGE_SQLSTATE_CLASSES: Readonly<Record<string, ErrorCode>> = {
  [SQLSTATE_CLASS.connectionException]: 'connection_exception',
  [SQLSTATE_CLASS.invalidAuthorization]: 'db_auth',
  [SQLSTATE_CLASS.insufficientResources]: 'db_resources',
  [SQLSTATE_CLASS.systemError]: 'db_resources',
};

const PERMANENT_SQLSTATE_CLASSES: Readonly<Record<string, ErrorCode>> = {
  [SQLSTATE_CLASS.integrityConstraintViolation]: 'constraint_violation',
  [SQLSTATE_CLASS.dataException]: 'data_exception',
};

/** Socket errors: the server is unreachable, which is true for every event, not this one. */
const OUTAGE_SYSCALL_CODES: ReadonlySet<string> = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ECONNABORTED',
]);

// node-postgres raises these without a code; they are its only signal of a lost connection or
// an exhausted pool, so they are matched by their fixed text (pg/lib/client.js, pg-pool/index.js).
const PG_CLIENT_OUTAGE_MESSAGES: ReadonlyArray<[RegExp, ErrorCode]> = [
  [/^Connection terminated/, 'db_connection_lost'],
  // query_timeout ran out: the server did not answer at all (statement_timeout would have), so it
  // is frozen or the link is gone; the pool discards that connection.
  [/^Query read timeout/, 'db_connection_lost'],
  [/^Client has encountered a connection error and is not queryable/, 'db_connection_lost'],
  [/^Client was closed and is not queryable/, 'db_connection_lost'],
  [/^timeout exceeded when trying to connect/, 'pool_exhausted'],
  [/^Cannot use a pool after calling end on the pool/, 'db_connection_lost'],
];

const MAX_CAUSE_DEPTH = 5;

/** The one place that decides what a failure means. Tested as a table in classify-failure.test.ts. */
export function classifyFailure(error: unknown): ClassifiedFailure {
  return classifyAt(error, 0) ?? { class: 'transient', code: 'unknown', message: messageOf(error) };
}

function classifyAt(error: unknown, depth: number): ClassifiedFailure | undefined {
  if (depth > MAX_CAUSE_DEPTH || error === null || error === undefined) return undefined;
  const message = messageOf(error);

  if (isDeadLetter(error)) return { class: 'permanent', code: (error as BridgeError).code, message };

  const sqlstate = sqlstateOf(error);
  if (sqlstate !== undefined) {
    const transient = TRANSIENT_SQLSTATES[sqlstate];
    if (transient) return { class: 'transient', code: transient, message, sqlstate };
    const outage = OUTAGE_SQLSTATES[sqlstate] ?? OUTAGE_SQLSTATE_CLASSES[sqlstate.slice(0, 2)];
    if (outage) return { class: 'outage', code: outage, message, sqlstate };
    const permanent = PERMANENT_SQLSTATE_CLASSES[sqlstate.slice(0, 2)];
    if (permanent) return { class: 'permanent', code: permanent, message, sqlstate };
    return { class: 'transient', code: `sqlstate_${sqlstate.toLowerCase()}`, message, sqlstate };
  }

  if (error instanceof BridgeError) {
    if (OUTAGE_CODES.has(error.code)) return { class: 'outage', code: error.code, message };
    if (PERMANENT_CODES.has(error.code) || !error.retryable) return { class: 'permanent', code: error.code, message };
    return { class: 'transient', code: error.code, message };
  }

  if (typeof error === 'object') {
    const code = (error as { code?: unknown }).code;
    if (typeof code === 'string' && OUTAGE_SYSCALL_CODES.has(code)) return { class: 'outage', code: 'db_unavailable', message };
    for (const [pattern, outageCode] of PG_CLIENT_OUTAGE_MESSAGES) {
      if (pattern.test(message)) return { class: 'outage', code: outageCode, message };
    }
    // Node reports a failed dual-stack connect as an AggregateError of per-address errors.
    if (error instanceof AggregateError) {
      for (const inner of error.errors) {
        const found = classifyAt(inner, depth + 1);
        if (found && found.class === 'outage') return { ...found, message };
      }
    }
    if ((error as { name?: unknown }).name === 'TimeoutError') return { class: 'transient', code: 'downstream_timeout', message };
    const cause = (error as { cause?: unknown }).cause;
    if (cause !== undefined) {
      const found = classifyAt(cause, depth + 1);
      if (found) return { ...found, message };
    }
  }
  return undefined;
}

function messageOf(error: unknown): string {
  if (error instanceof Error) return error.message || error.name;
  if (typeof error === 'string') return error;
  try {
    return JSON.stringify(error) ?? String(error);
  } catch {
    return String(error);
  }
}

/** For failures known without an error object (a parse result, a quarantine outcome). */
export function permanentFailure(code: ErrorCode, message: string): ClassifiedFailure {
  return { class: 'permanent', code, message };
}
