import { existsSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { allCommands } from './commands/index.ts';
import { cliReferencePath, renderCliReference } from './reference.ts';

describe('docs/cli.md', () => {
  it('is what renderCliReference() renders from the command specs (else: run npm run docs:cli)', () => {
    const current = existsSync(cliReferencePath) ? readFileSync(cliReferencePath, 'utf8') : undefined;
    expect(current, 'docs/cli.md is missing: run npm run docs:cli').toBeDefined();
    expect(current, 'docs/cli.md is stale (the command specs changed): run npm run docs:cli').toBe(renderCliReference());
  });

  it('has a section with usage, options and examples for every command', () => {
    const text = renderCliReference();
    for (const command of allCommands) {
      const name = `bridge ${command.path.join(' ')}`;
      expect(text).toContain(`## \`${name}\``);
      expect(text).toContain(`${name} ${command.usage}`.trimEnd());
      for (const option of Object.keys(command.options)) expect(text).toContain(`--${option}`);
      for (const example of command.examples) expect(text).toContain(example);
    }
  });

  it('takes defaults from the spec, or from the description that states them', () => {
    const text = renderCliReference();
    expect(text).toMatch(/`--timeout-ms <N>` \| string \| 60000 \|/);
    expect(text).toMatch(/`--partition <P>` \| string \| all \|/);
  });
});
