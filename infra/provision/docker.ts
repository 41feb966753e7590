import { spawnSync } from 'node:child_process';

/**
 * True only when a Docker engine answers, not merely when the client is installed. Only the tests'
 * global set-up asks (testcontainers); the start commands never use Docker.
 */
export function dockerEngineAvailable(): boolean {
  if (process.env.BRIDGE_NO_DOCKER === 'true') return false;
  const result = spawnSync('docker', ['info', '--format', '{{.ServerVersion}}'], { encoding: 'utf8', timeout: 5000 });
  return result.status === 0 && result.stdout.trim().length > 0;
}
