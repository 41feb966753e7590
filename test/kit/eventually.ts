// Waiting in tests: a plain pause, and one polling helper with one signature for every file.

/** Resolves after `ms` milliseconds. */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

export interface EventuallyOptions {
  /** Give up after this long (default 60 s). */
  timeoutMs?: number;
  /** Pause between tries (default 100 ms). */
  intervalMs?: number;
  /** What is awaited, for the timeout error. */
  message?: string;
}

/**
 * Calls `fn` until it returns something other than undefined or false, and returns that. A try
 * that throws counts as "not yet" (as vi.waitFor does); the last error is in the timeout message,
 * so a condition that never holds still fails with its cause.
 */
export async function eventually<T>(
  fn: () => Promise<T | undefined | false> | T | undefined | false,
  { timeoutMs = 60_000, intervalMs = 100, message = 'a condition' }: EventuallyOptions = {},
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await fn();
      if (value !== undefined && value !== false) return value;
    } catch (error) {
      last = error;
    }
    if (Date.now() >= deadline) break;
    await sleep(intervalMs);
  }
  const cause = last === undefined ? '' : `: ${last instanceof Error ? last.message : String(last)}`;
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${message}${cause}`);
}
