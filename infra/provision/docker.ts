import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { repoRoot } from '../paths.ts';

export const composeFile = path.join(repoRoot, 'infra', 'provision', 'docker-compose.yml');

/** True only when a Docker engine answers, not merely when the client is installed. */
export function dockerEngineAvailable(): boolean {
  if (process.env.BRIDGE_NO_DOCKER === 'true') return false;
  const result = spawnSync('docker', ['info', '--format', '{{.ServerVersion}}'], { encoding: 'utf8', timeout: 5000 });
  return result.status === 0 && result.stdout.trim().length > 0;
}

export function compose(args: string[]): void {
  const result = spawnSync('docker', ['compose', '-f', composeFile, ...args], { stdio: 'inherit' });
  if (result.status !== 0) throw new Error(`docker compose ${args.join(' ')} failed with ${result.status}`);
}
