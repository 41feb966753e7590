import { ESLint } from 'eslint';
import { describe, expect, it } from 'vitest';

// The layers (services -> domain -> plumbing) are enforced by lint; these prove the rules bite.
const eslint = new ESLint({ cwd: new URL('../..', import.meta.url).pathname });

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
    ['services/worker/retry/retry-router.ts', '../../../shared/domain/failures/index.ts'],
  ])('%s may not import %s', async (file, specifier) => {
    expect(await restricted(file, specifier)).toBe(true);
  });

  it.each([
    ['shared/domain/apply/decide.ts', '#plumbing/db/pool.ts'],
    ['shared/domain/apply/decide.ts', '#domain/contract/index.ts'],
    ['shared/domain/apply/decide.ts', './types.ts'],
    ['services/cli/commands/dlq.ts', '../output.ts'],
    ['services/console/pages/dlq.ts', '#domain/operations/dlq-records.ts'],
    ['services/worker/retry/retry-router.ts', '#domain/failures/index.ts'],
    ['services/worker/worker.ts', '#plumbing/kafka/client.ts'],
  ])('%s may import %s', async (file, specifier) => {
    expect(await restricted(file, specifier)).toBe(false);
  });
});

// Only shared/plumbing/kafka may use kafkajs, so replacing the client is a change to that folder.
async function kafkaWallBreaches(filePath: string, code: string): Promise<number> {
  const [result] = await eslint.lintText(code, { filePath });
  const wall = ['@typescript-eslint/no-restricted-imports', 'no-restricted-syntax'];
  return (result?.messages ?? []).filter((m) => m.ruleId !== null && wall.includes(m.ruleId)).length;
}

const kafkajsUses = {
  'an import': "import { Partitioners } from 'kafkajs';\nexport const p = Partitioners;\n",
  'a type import': "import type { Kafka } from 'kafkajs';\nexport type K = Kafka;\n",
  'a re-export': "export type { Kafka } from 'kafkajs';\n",
  'a subpath': "import murmur2 from 'kafkajs/src/producer/partitioners/default/murmur2';\nexport const m = murmur2;\n",
  'an import() type': "export type K = import('kafkajs').Kafka;\n",
  'an import() expression': "export const k = await import('kafkajs');\n",
  'a require()': "export const k = require('kafkajs/src/protocol/recordBatch/crc32C');\n",
};

describe('the Kafka client wall', () => {
  it.each(
    [
      'services/worker/worker.ts',
      'shared/domain/apply/source-record.ts',
      'shared/plumbing/db/pool.ts',
      'test/relay/stop-drain.test.ts',
      'bench/worker/run.ts',
      'infra/provision/kafka/local-kafka.ts',
    ].flatMap((file) => Object.entries(kafkajsUses).map(([how, code]) => [file, how, code])),
  )('%s may not use kafkajs (%s)', async (file, _how, code) => {
    expect(await kafkaWallBreaches(file, code)).toBe(1);
  });

  it.each(
    Object.entries(kafkajsUses).flatMap(([how, code]) => [
      ['shared/plumbing/kafka/client.ts', how, code],
      ['shared/plumbing/kafka/crc32c.test.ts', how, code],
    ]),
  )('%s may use kafkajs (%s)', async (file, _how, code) => {
    expect(await kafkaWallBreaches(file, code)).toBe(0);
  });

  it.each([
    ['services/worker/worker.ts', "import type { Consumer } from '#plumbing/kafka/types.ts';\nexport type C = Consumer;\n"],
    ['test/kit/worker.ts', "import { defaultPartitioner } from '#plumbing/kafka/producers.ts';\nexport const p = defaultPartitioner;\n"],
  ])('%s may take the client through #plumbing/kafka', async (file, code) => {
    expect(await kafkaWallBreaches(file, code)).toBe(0);
  });

  it('adds to the layer rules instead of replacing them', async () => {
    expect(await restricted('services/cli/commands/dlq.ts', '#services/worker/worker.ts')).toBe(true);
    expect(await kafkaWallBreaches('services/cli/commands/dlq.ts', kafkajsUses['an import'])).toBe(1);
  });
});
