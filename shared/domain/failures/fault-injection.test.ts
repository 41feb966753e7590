import { describe, expect, it } from 'vitest';
import { classifyFailure } from './classify-failure.ts';
import { faultInjectSchema, FaultInjector } from './fault-injection.ts';

describe('FAULT_INJECT', () => {
  it('is off unless set', () => {
    expect(faultInjectSchema.parse(undefined)).toEqual([]);
    expect(faultInjectSchema.parse('')).toEqual([]);
    expect(new FaultInjector([]).enabled).toBe(false);
  });

  it('parses several rules', () => {
    expect(faultInjectSchema.parse('transient:acme/theme/t1:3, permanent:acme/theme/t2:1,outage:*:2')).toEqual([
      { kind: 'transient', resource: 'acme/theme/t1', count: 3 },
      { kind: 'permanent', resource: 'acme/theme/t2', count: 1 },
      { kind: 'outage', resource: '*', count: 2 },
    ]);
  });

  it('reports every bad rule', () => {
    const result = faultInjectSchema.safeParse(
      'sometimes:acme/theme/t1:3,transient:acme:1,transient:acme/theme/t1:0,transient:a/theme/b:1:x',
    );
    expect(result.success).toBe(false);
    expect(result.error!.issues).toHaveLength(4);
  });

  it('fails the first N attempts on the resource, then lets it through, and classifies like the real error', () => {
    const faults = new FaultInjector(faultInjectSchema.parse('transient:acme/theme/t1:2,permanent:acme/theme/t2:1,outage:acme/theme/t3:1'));
    const failures: string[] = [];
    for (const key of ['acme/theme/t1', 'acme/theme/t1', 'acme/theme/t1', 'acme/theme/t2', 'acme/theme/t3', 'acme/theme/other']) {
      try {
        faults.check(key);
        failures.push('ok');
      } catch (error) {
        const failure = classifyFailure(error);
        failures.push(`${failure.class}:${failure.code}`);
      }
    }
    expect(failures).toEqual([
      'transient:serialization_failure',
      'transient:serialization_failure',
      'ok',
      'permanent:constraint_violation',
      'outage:db_unavailable',
      'ok',
    ]);
  });
});
