import type { IHeaders } from 'kafkajs';

/** Record headers as kafkajs hands them over on consume (Buffers, or arrays for a repeated header). */
export type RecordHeaders = IHeaders;

/** A header's first value as text; undefined when absent. */
export function headerText(headers: RecordHeaders | undefined, name: string): string | undefined {
  const value = headers?.[name];
  if (value === undefined) return undefined;
  const first = Array.isArray(value) ? value[0] : value;
  if (first === undefined) return undefined;
  return typeof first === 'string' ? first : first.toString('utf8');
}
