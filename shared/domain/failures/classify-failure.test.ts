import { describe, expect, it } from 'vitest';
import { BridgeError } from '#plumbing/errors/bridge-error.ts';
import { classifyFailure, type FailureClass } from './classify-failure.ts';
import { DeadLetter } from './dead-letter.ts';

function pgError(code: string, message = `pg error ${code}`): Error {
  return Object.assign(new Error(message), { code, severity: 'ERROR' });
}

function sysError(code: string): Error {
  return Object.assign(new Error(`connect ${code} 127.0.0.1:5432`), { code, syscall: 'connect' });
}

const table: Array<[string, unknown, FailureClass, string]> = [
  // permanent: straight to the DLQ
  ['forced dead letter', new DeadLetter('manual_reject', 'handler refused'), 'permanent', 'manual_reject'],
  ['invalid envelope', new BridgeError('invalid_envelope', 'bad', { retryable: false }), 'permanent', 'invalid_envelope'],
  ['unknown event_version', new BridgeError('unknown_event_version', 'v2', { retryable: false }), 'permanent', 'unknown_event_version'],
  ['quarantine', new BridgeError('quarantined', 'same id, other body', { retryable: true }), 'permanent', 'quarantined'],
  ['unique violation 23505', pgError('23505'), 'permanent', 'constraint_violation'],
  ['check violation 23514', pgError('23514'), 'permanent', 'constraint_violation'],
  ['not null violation 23502', pgError('23502'), 'permanent', 'constraint_violation'],
  ['numeric out of range 22003', pgError('22003'), 'permanent', 'data_exception'],
  ['invalid text representation 22P02', pgError('22P02'), 'permanent', 'data_exception'],
  ['non-retryable bridge error', new BridgeError('bad_mapping', 'x', { retryable: false }), 'permanent', 'bad_mapping'],
  // transient for one event: the next retry topic
  ['serialization failure 40001', pgError('40001'), 'transient', 'serialization_failure'],
  ['deadlock 40P01', pgError('40P01'), 'transient', 'deadlock_detected'],
  ['lock timeout 55P03', pgError('55P03'), 'outage', 'lock_timeout'],
  ['statement timeout 57014', pgError('57014'), 'outage', 'statement_timeout'],
  ['downstream timeout', new BridgeError('downstream_timeout', 'cdn slow', { retryable: true }), 'transient', 'downstream_timeout'],
  ['a TimeoutError', Object.assign(new Error('took too long'), { name: 'TimeoutError' }), 'transient', 'downstream_timeout'],
  ['other sqlstate', pgError('42P01'), 'transient', 'sqlstate_42p01'],
  ['unknown error', new TypeError('x is undefined'), 'transient', 'unknown'],
  ['a string', 'boom', 'transient', 'unknown'],
  // infrastructure outage: pause the main consumer
  ['connection refused', sysError('ECONNREFUSED'), 'outage', 'db_unavailable'],
  ['connection reset', sysError('ECONNRESET'), 'outage', 'db_unavailable'],
  ['admin shutdown 57P01', pgError('57P01', 'terminating connection due to administrator command'), 'outage', 'db_shutdown'],
  ['crash shutdown 57P02', pgError('57P02'), 'outage', 'db_shutdown'],
  ['starting up 57P03', pgError('57P03', 'the database system is starting up'), 'outage', 'db_shutdown'],
  ['connection failure 08006', pgError('08006'), 'outage', 'connection_exception'],
  ['connection does not exist 08003', pgError('08003'), 'outage', 'connection_exception'],
  ['too many connections 53300', pgError('53300'), 'outage', 'pool_exhausted'],
  ['disk full 53100', pgError('53100'), 'outage', 'db_resources'],
  ['io error 58030', pgError('58030'), 'outage', 'db_resources'],
  ['auth failed 28P01', pgError('28P01'), 'outage', 'db_auth'],
  ['database missing 3D000', pgError('3D000'), 'outage', 'db_missing'],
  ['pg: connection terminated', new Error('Connection terminated unexpectedly'), 'outage', 'db_connection_lost'],
  // query_timeout: the server did not answer within statement_timeout + 2 s (frozen, or the network dropped the link)
  ['pg: client read timeout', new Error('Query read timeout'), 'outage', 'db_connection_lost'],
  ['pg: client not queryable', new Error('Client has encountered a connection error and is not queryable'), 'outage', 'db_connection_lost'],
  ['pg-pool: exhausted / connect timeout', new Error('timeout exceeded when trying to connect'), 'outage', 'pool_exhausted'],
  [
    'pg-pool: connection timeout with cause',
    new Error('Connection terminated due to connection timeout', { cause: new Error('Connection terminated unexpectedly') }),
    'outage',
    'db_connection_lost',
  ],
  [
    'dual-stack connect refused',
    new AggregateError([sysError('ECONNREFUSED'), sysError('ECONNREFUSED')], 'connect failed'),
    'outage',
    'db_unavailable',
  ],
  ['outage wrapped in a cause', new Error('apply failed', { cause: sysError('ECONNREFUSED') }), 'outage', 'db_unavailable'],
  ['outage bridge code', new BridgeError('db_unavailable', 'probe failed', { retryable: true }), 'outage', 'db_unavailable'],
];

describe('classifyFailure', () => {
  it.each(table)('%s', (_name, error, expectedClass, expectedCode) => {
    const failure = classifyFailure(error);
    expect(failure.class).toBe(expectedClass);
    expect(failure.code).toBe(expectedCode);
  });

  it('keeps the SQLSTATE and the message', () => {
    const failure = classifyFailure(pgError('40001', 'could not serialize access'));
    expect(failure).toEqual({
      class: 'transient',
      code: 'serialization_failure',
      message: 'could not serialize access',
      sqlstate: '40001',
    });
  });

  it('does not read a non-SQLSTATE code as one', () => {
    expect(classifyFailure(Object.assign(new Error('x'), { code: 'ERR_SOMETHING' })).class).toBe('transient');
  });
});
