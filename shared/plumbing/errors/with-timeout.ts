import { BridgeError, type ErrorCode } from './bridge-error.ts';

/** Rejects with a retryable BridgeError(code) when `work` has not settled within `ms`. */
export async function withTimeout<T>(work: Promise<T>, ms: number, code: ErrorCode, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new BridgeError(code, `${what} did not finish within ${ms} ms`, { retryable: true })), ms);
  });
  try {
    return await Promise.race([work, timeout]);
  } finally {
    clearTimeout(timer);
  }
}
