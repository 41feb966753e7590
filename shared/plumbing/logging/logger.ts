import { pino, type Logger, type LoggerOptions } from 'pino';

export type { Logger } from 'pino';

export interface LoggerSettings {
  name: string;
  level?: string;
}

// pino's isoTime, formatted once per millisecond: the services log one line per request or event,
// often several in the same millisecond, and Date#toISOString showed up in their CPU profiles.
let lastMillis = -1;
let lastTime = '';
export function isoTimeCached(): string {
  const now = Date.now();
  if (now !== lastMillis) {
    lastMillis = now;
    lastTime = `,"time":"${new Date(now).toISOString()}"`;
  }
  return lastTime;
}

/** What LOG_BUFFER_BYTES defaults to (see stdoutDestination). */
export const DEFAULT_LOG_BUFFER_BYTES = 4096;
/** sonic-boom requires its minLength below its maxWrite (16 KiB). */
export const MAX_LOG_BUFFER_BYTES = 8192;
/** How often held log lines are written when fewer than bufferBytes came. */
export const LOG_FLUSH_INTERVAL_MS = 100;

/**
 * The services' stdout: asynchronous, lines held until `bufferBytes` of them are there or
 * LOG_FLUSH_INTERVAL_MS passed, then written in one write. The services log a line per request
 * or per event; written one by one, each line cost a write on libuv's thread pool and the futex
 * wake-ups around it (a large share of an ingress's syscalls under load, strace -c). pino writes what is held
 * synchronously when the process exits (a SIGKILL or an out-of-memory kill loses at most the
 * last 100 ms). 0 writes each line as soon as the previous write finished (sonic-boom's default).
 */
export function stdoutDestination(bufferBytes = DEFAULT_LOG_BUFFER_BYTES): pino.DestinationStream {
  if (bufferBytes === 0) return pino.destination({ dest: 1, sync: false, minLength: 0 });
  // Held lines as Buffers, not as one growing string: sonic-boom's string mode measures the held
  // string's UTF-8 length on every line, which flattens (copies) all of it each time, so a full
  // buffer cost its size again per line in copies and young-generation garbage. In buffer mode
  // each line is copied once and the held ones are joined once, at the write.
  const stream = pino.destination({
    dest: 1,
    sync: false,
    minLength: bufferBytes,
    periodicFlush: LOG_FLUSH_INTERVAL_MS,
    contentMode: 'buffer',
  });
  // `stream.write` is looked up on each line: pino's EPIPE handler replaces it on the stream.
  return {
    write: (line: string) => stream.write(Buffer.from(line) as unknown as string),
    flush: (cb?: (err?: Error) => void) => stream.flush(cb),
    flushSync: () => stream.flushSync(),
  } as pino.DestinationStream;
}

// One JSON line per event on stdout; callers add child bindings (event_id, topic, partition, offset).
export function createLogger(settings: LoggerSettings, destination?: pino.DestinationStream): Logger {
  const options: LoggerOptions = {
    name: settings.name,
    level: settings.level ?? process.env.LOG_LEVEL ?? 'info',
    base: { service: settings.name },
    timestamp: isoTimeCached,
    formatters: { level: (label) => ({ level: label }) },
    redact: { paths: ['secret', '*.secret', 'signature', '*.signature', 'body'], censor: '[redacted]' },
  };
  return destination ? pino(options, destination) : pino(options);
}
