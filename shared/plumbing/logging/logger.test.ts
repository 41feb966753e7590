import { describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { isoTimeCached } from './logger.ts';

describe('isoTimeCached', () => {
  it('is pino.stdTimeFunctions.isoTime: same fragment format, the current millisecond', () => {
    for (let i = 0; i < 50; i += 1) {
      const before = pino.stdTimeFunctions.isoTime();
      const cached = isoTimeCached();
      const after = pino.stdTimeFunctions.isoTime();
      expect(cached).toMatch(/^,"time":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"$/);
      // ISO-8601 strings of one format order like the times they show.
      expect(cached >= before && cached <= after).toBe(true);
    }
  });
});
