/**
 * Test-only fault injection: with WORKER_CRASH_AT=<point> (and WORKER_CRASH_AFTER=<n>, default 1)
 * the process SIGKILLs itself the n-th time it reaches that point, so the crash tests can stop the
 * worker exactly between two durable steps. Off unless configured; never switched by NODE_ENV.
 */
export const CRASH_POINTS = [
  // A chunk's transaction has committed; its offsets are not resolved or committed yet.
  'after-commit-before-offset',
  // The relay has read unpublished outbox rows; nothing is sent yet.
  'after-commit-before-publish',
  // The relay's send was acknowledged; the rows are not marked published yet (they will repeat).
  'after-publish-before-mark',
] as const;

export type CrashPoint = (typeof CRASH_POINTS)[number];

export interface CrashPoints {
  reach(point: CrashPoint): void;
}

export const noCrashPoints: CrashPoints = { reach: () => {} };

export function createCrashPoints(point: CrashPoint | undefined, after: number): CrashPoints {
  if (point === undefined) return noCrashPoints;
  let hits = 0;
  return {
    reach(reached) {
      if (reached !== point) return;
      hits += 1;
      if (hits >= after) process.kill(process.pid, 'SIGKILL');
    },
  };
}
