import pg from 'pg';
import type { Consumer } from '#plumbing/kafka/types.ts';
import type { Logger } from '#plumbing/logging/logger.ts';
import { probeDelayMs, type ClassifiedFailure, type FailureMetrics } from '#domain/failures/index.ts';
import { ping } from '#domain/store/session.ts';

export interface OutageControllerOptions {
  /** Label for metrics and logs: main, retry.1 ... */
  name: string;
  consumer: Pick<Consumer, 'pause' | 'resume'>;
  topics: string[];
  /** Resolves true when the dependency answers again. */
  probe: () => Promise<boolean>;
  probeInitialMs: number;
  probeMaxMs: number;
  metrics: FailureMetrics;
  logger: Logger;
}

/** A probe on a fresh connection: a pool full of dead connections must not fake an outage, nor hide one. */
export function postgresProbe(url: string, timeoutMs = 2_000): () => Promise<boolean> {
  return async () => {
    const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: timeoutMs, query_timeout: timeoutMs });
    client.on('error', () => {});
    try {
      await client.connect();
      await ping(client);
      return true;
    } catch {
      return false;
    } finally {
      await client.end().catch(() => {});
    }
  };
}

/**
 * Pauses every partition of a consumer while its database is down, and resumes when a health
 * probe passes, with capped exponential backoff between probes. The consumer's handler must not
 * resolve the record that hit the outage (nor any after it), so they are fetched again on resume:
 * an outage never drains a topic into the retry chain or the DLQ.
 */
export class OutageController {
  readonly #o: OutageControllerOptions;
  #paused = false;
  #closed = false;
  #timer: NodeJS.Timeout | undefined;
  #wake: (() => void) | undefined;
  #loop: Promise<void> | undefined;

  constructor(options: OutageControllerOptions) {
    this.#o = options;
    options.metrics.consumerPaused.set({ consumer: options.name }, 0);
  }

  get paused(): boolean {
    return this.#paused;
  }

  /** Idempotent: the first call pauses and starts probing; later calls during the outage do nothing. */
  trip(failure: ClassifiedFailure): void {
    if (this.#paused || this.#closed) return;
    const { consumer, topics, metrics, name, logger } = this.#o;
    this.#paused = true;
    consumer.pause(topics.map((topic) => ({ topic })));
    metrics.consumerPaused.set({ consumer: name }, 1);
    metrics.outagePauses.inc({ consumer: name });
    logger.warn({ consumer: name, failure_code: failure.code, error_message: failure.message }, 'infrastructure outage: consumer paused');
    this.#loop = this.#probeUntilHealthy();
  }

  async #probeUntilHealthy(): Promise<void> {
    const { consumer, topics, metrics, name, logger, probe, probeInitialMs, probeMaxMs } = this.#o;
    const started = Date.now();
    for (let attempt = 0; !this.#closed; attempt += 1) {
      await new Promise<void>((resolve) => {
        this.#wake = resolve;
        this.#timer = setTimeout(resolve, probeDelayMs(attempt, probeInitialMs, probeMaxMs));
      });
      if (this.#closed) return;
      if (await probe()) {
        this.#paused = false;
        consumer.resume(topics.map((topic) => ({ topic })));
        metrics.consumerPaused.set({ consumer: name }, 0);
        logger.info({ consumer: name, paused_ms: Date.now() - started, probes: attempt + 1 }, 'dependency healthy again: consumer resumed');
        return;
      }
      logger.debug({ consumer: name, probes: attempt + 1 }, 'health probe failed; still paused');
    }
  }

  async close(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#timer);
    this.#wake?.();
    await this.#loop;
  }
}
