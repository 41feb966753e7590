// Unique names for everything a test creates on the shared broker and Postgres.
import { randomBytes } from 'node:crypto';

/** Unique per test: topics, groups and databases never collide between tests or runs. */
export function uniqueName(prefix: string): string {
  return `${prefix}-${Date.now().toString(36)}-${randomBytes(3).toString('hex')}`;
}
