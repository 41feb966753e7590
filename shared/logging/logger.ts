import { pino, type Logger, type LoggerOptions } from 'pino';

export type { Logger } from 'pino';

export interface LoggerSettings {
  name: string;
  level?: string;
}

// One JSON line per event on stdout; callers add child bindings (event_id, topic, partition, offset).
export function createLogger(settings: LoggerSettings, destination?: pino.DestinationStream): Logger {
  const options: LoggerOptions = {
    name: settings.name,
    level: settings.level ?? process.env.LOG_LEVEL ?? 'info',
    base: { service: settings.name },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label) => ({ level: label }) },
    redact: { paths: ['secret', '*.secret', 'signature', '*.signature', 'body'], censor: '[redacted]' },
  };
  return destination ? pino(options, destination) : pino(options);
}
