import { execFileSync, spawnSync } from 'node:child_process';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { repoRoot } from '../kit/infra.ts';

// The alerting rules and the sample Prometheus configuration, checked by Prometheus's own tool.
// promtool comes from Debian's prometheus package, unpacked by infra/repo/promtool.sh when missing.
const promtool = execFileSync('sh', [path.join(repoRoot, 'infra', 'repo', 'promtool.sh')], { encoding: 'utf8' }).trim();
const rulesDir = path.join(repoRoot, 'infra', 'provision', 'monitoring', 'prometheus');

function run(...args: string[]): { status: number | null; output: string } {
  const result = spawnSync(promtool, args, { cwd: rulesDir, encoding: 'utf8' });
  return { status: result.status, output: `${result.stdout}${result.stderr}` };
}

describe('Prometheus alerting rules (promtool)', () => {
  it('the rules and prometheus.yml are valid', () => {
    const rules = run('check', 'rules', 'bridge-alerts.yml');
    expect(rules.output).toContain('SUCCESS');
    expect(rules.status).toBe(0);
    const config = run('check', 'config', 'prometheus.yml');
    expect(config.status, config.output).toBe(0);
  });

  it('every rule behaves as its unit tests say (promtool test rules)', () => {
    const result = run('test', 'rules', 'bridge-alerts.test.yml');
    expect(result.status, result.output).toBe(0);
    expect(result.output).toContain('SUCCESS');
  });

  it('every alert has at least one unit test', async () => {
    const { readFileSync } = await import('node:fs');
    const rules = readFileSync(path.join(rulesDir, 'bridge-alerts.yml'), 'utf8');
    const tests = readFileSync(path.join(rulesDir, 'bridge-alerts.test.yml'), 'utf8');
    const alerts = [...rules.matchAll(/^\s*- alert: (\w+)/gm)].map((m) => m[1]!);
    expect(alerts.length).toBeGreaterThan(5);
    const tested = new Set([...tests.matchAll(/alertname: (\w+)/g)].map((m) => m[1]!));
    expect(alerts.filter((a) => !tested.has(a))).toEqual([]);
  });
});
