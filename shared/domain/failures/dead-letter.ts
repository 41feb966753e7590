import { BridgeError, type ErrorCode } from '#plumbing/errors/bridge-error.ts';

/**
 * Thrown by a handler that knows retrying cannot help: the event goes to the DLQ at once,
 * skipping the rest of the retry chain (after BullMQ's UnrecoverableError and
 * kafkajs-async-retry's DeadLetter).
 */
export class DeadLetter extends BridgeError {
  constructor(reason: ErrorCode, message: string, options: { cause?: unknown } = {}) {
    super(reason, message, { retryable: false, cause: options.cause });
    this.name = 'DeadLetter';
  }
}

export function isDeadLetter(error: unknown): error is DeadLetter {
  return error instanceof DeadLetter || (error instanceof Error && error.name === 'DeadLetter');
}
