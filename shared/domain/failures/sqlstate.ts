/**
 * Postgres SQLSTATE codes the failure classification relies on (Appendix A of the Postgres manual).
 * Matched as constants or by class (the first two characters), never by message text.
 */
export const SQLSTATE = {
  // Class 40: transaction rollback; retrying the same event later can succeed.
  serializationFailure: '40001',
  deadlockDetected: '40P01',
  // Class 55: lock_not_available (lock_timeout).
  lockNotAvailable: '55P03',
  // Class 57: operator intervention.
  queryCanceled: '57014',
  adminShutdown: '57P01',
  crashShutdown: '57P02',
  cannotConnectNow: '57P03',
  // Class 53: insufficient resources.
  tooManyConnections: '53300',
  // Class 3D: the configured database does not exist.
  invalidCatalogName: '3D000',
} as const;

export const SQLSTATE_CLASS = {
  /** Class 08: connection exception. */
  connectionException: '08',
  /** Class 22: data exception (value out of range, invalid text representation...). */
  dataException: '22',
  /** Class 23: integrity constraint violation (unique, check, foreign key, not null). */
  integrityConstraintViolation: '23',
  /** Class 28: invalid authorization specification. */
  invalidAuthorization: '28',
  /** Class 53: insufficient resources (disk full, out of memory, too many connections). */
  insufficientResources: '53',
  /** Class 58: system error (I/O error) outside Postgres. */
  systemError: '58',
} as const;

const SQLSTATE_PATTERN = /^[0-9A-Z]{5}$/;

/** The SQLSTATE of a pg DatabaseError, or undefined for anything else. */
export function sqlstateOf(error: unknown): string | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  const code = (error as { code?: unknown }).code;
  return typeof code === 'string' && SQLSTATE_PATTERN.test(code) ? code : undefined;
}
