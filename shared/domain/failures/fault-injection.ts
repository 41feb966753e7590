import { z } from 'zod';

/**
 * Test-only failures switched on by explicit configuration (FAULT_INJECT), never by NODE_ENV.
 * Each injected error looks like the real thing (a SQLSTATE or a socket error code), so it goes
 * through the same classification as a production failure.
 */
export type FaultKind = 'transient' | 'permanent' | 'outage';

export interface FaultRule {
  kind: FaultKind;
  /** Resource key `<tenant>/<type>/<id>`; `*` matches every resource. */
  resource: string;
  /** How many attempts on that resource fail before it succeeds. */
  count: number;
}

const ruleSchema = z.object({
  kind: z.enum(['transient', 'permanent', 'outage']),
  resource: z.string().regex(/^(\*|[A-Za-z0-9_.-]+\/[a-z][a-z0-9_]*\/[A-Za-z0-9_.-]+)$/, 'resource must be <tenant>/<type>/<id> or *'),
  count: z.coerce.number().int().positive(),
});

/** FAULT_INJECT="transient:<tenant/type/id>:<count>,permanent:<tenant/type/id>:<count>,outage:..." */
export const faultInjectSchema = z
  .string()
  .optional()
  .transform((text, ctx): FaultRule[] => {
    if (text === undefined || text.trim() === '') return [];
    const rules: FaultRule[] = [];
    for (const [index, part] of text.split(',').entries()) {
      const [kind, resource, count, ...extra] = part.trim().split(':');
      const parsed = ruleSchema.safeParse({ kind, resource, count });
      if (!parsed.success || extra.length > 0) {
        const why = parsed.success ? 'too many fields' : parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ');
        ctx.addIssue({ code: 'custom', message: `rule ${index + 1} "${part}" is not kind:<tenant/type/id>:<count> (${why})` });
        continue;
      }
      rules.push(parsed.data);
    }
    return rules;
  });

export class InjectedFault extends Error {
  readonly code: string;
  readonly injected = true;
  constructor(kind: FaultKind, resource: string) {
    const [code, what] =
      kind === 'transient'
        ? ['40001', 'could not serialize access (injected)']
        : kind === 'permanent'
          ? ['23514', 'check constraint violated (injected)']
          : ['ECONNREFUSED', 'connect ECONNREFUSED (injected)'];
    super(`${what} for ${resource}`);
    this.name = 'InjectedFault';
    this.code = code;
  }
}

export class FaultInjector {
  private readonly remaining: Array<FaultRule & { left: number }>;

  constructor(rules: readonly FaultRule[]) {
    this.remaining = rules.map((r) => ({ ...r, left: r.count }));
  }

  get enabled(): boolean {
    return this.remaining.length > 0;
  }

  /** Throws an InjectedFault while a rule for this resource has attempts left. */
  check(resourceKey: string): void {
    for (const rule of this.remaining) {
      if (rule.left <= 0) continue;
      if (rule.resource !== '*' && rule.resource !== resourceKey) continue;
      rule.left -= 1;
      throw new InjectedFault(rule.kind, resourceKey);
    }
  }

  /** Whether check() would throw for this resource, without counting an attempt. */
  wouldFail(resourceKey: string): boolean {
    return this.remaining.some((r) => r.left > 0 && (r.resource === '*' || r.resource === resourceKey));
  }

  /** Attempts still to fail, per rule (for tests and logs). */
  pending(): Array<FaultRule & { left: number }> {
    return this.remaining.map((r) => ({ ...r }));
  }
}
