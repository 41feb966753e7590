import { ESLint } from 'eslint';
import { describe, expect, it } from 'vitest';

// The layers (services -> domain -> plumbing) are enforced by lint; these prove the rules bite.
const eslint = new ESLint({ cwd: new URL('..', import.meta.url).pathname });

async function restricted(filePath: string, specifier: string): Promise<boolean> {
  const [result] = await eslint.lintText(`import { x } from '${specifier}';\nexport const y = x;\n`, { filePath });
  return (result?.messages ?? []).some((m) => m.ruleId === 'no-restricted-imports');
}

describe('layer rules', () => {
  it.each([
    ['shared/plumbing/db/pool.ts', '#domain/apply/index.ts'],
    ['shared/plumbing/db/pool.ts', '../../domain/apply/index.ts'],
    ['shared/plumbing/kafka/client.ts', '#services/worker/worker.ts'],
    ['shared/domain/apply/decide.ts', '#services/worker/worker.ts'],
    ['shared/domain/apply/decide.ts', '../contract/envelope.ts'],
    ['services/cli/commands/dlq.ts', '#services/worker/worker.ts'],
    ['services/cli/commands/dlq.ts', '../../worker/worker.ts'],
    ['services/ingress/ingress.ts', '../worker/worker.ts'],
    ['services/console/console.ts', '#services/cli/commands/dlq.ts'],
    ['services/console/pages/dlq.ts', '../../cli/output.ts'],
    ['services/worker/failures/retry-router.ts', '../../../shared/domain/failures/index.ts'],
  ])('%s may not import %s', async (file, specifier) => {
    expect(await restricted(file, specifier)).toBe(true);
  });

  it.each([
    ['shared/domain/apply/decide.ts', '#plumbing/db/pool.ts'],
    ['shared/domain/apply/decide.ts', '#domain/contract/index.ts'],
    ['shared/domain/apply/decide.ts', './types.ts'],
    ['services/cli/commands/dlq.ts', '../output.ts'],
    ['services/console/pages/dlq.ts', '#domain/operations/dlq-records.ts'],
    ['services/worker/failures/retry-router.ts', '#domain/failures/index.ts'],
    ['services/worker/worker.ts', '#plumbing/kafka/client.ts'],
  ])('%s may import %s', async (file, specifier) => {
    expect(await restricted(file, specifier)).toBe(false);
  });
});
