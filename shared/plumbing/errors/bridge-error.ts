/** One base error with a stable code and whether retrying can help (after kafkajs's retriable split). */
export class BridgeError extends Error {
  readonly code: string;
  readonly retryable: boolean;
  constructor(code: string, message: string, options: { retryable: boolean; cause?: unknown }) {
    super(message, { cause: options.cause });
    this.name = 'BridgeError';
    this.code = code;
    this.retryable = options.retryable;
  }
}
