// One-off reads of the sources in Postgres, for the tools that run a command and exit (the CLI's
// `send` and `reconcile`): the same snapshot a running service loads, resolved the same way.
import type { Pool } from 'pg';
import { loadLiveSnapshot, type LiveSnapshot } from './live.ts';
import type { SecretKeyring } from './secret-box.ts';
import { toReconcileSource } from './source-spec.ts';
import { SourcesConfigError, type ReconcileSource, type WebhookSource } from './sources-config.ts';

/**
 * A snapshot's sources that declare `reconcile`, their API credentials read from `env`. A source
 * whose credential is missing is left out and reported to `onProblem` (a change made through the
 * API must not stop a running service).
 */
export function reconcileSourcesOf(
  snapshot: Pick<LiveSnapshot, 'specs'>,
  env: Record<string, string | undefined>,
  onProblem: (sourceId: string, problem: string) => void,
): ReconcileSource[] {
  const sources: ReconcileSource[] = [];
  for (const spec of snapshot.specs) {
    try {
      const source = toReconcileSource(spec, env);
      if (source !== undefined) sources.push(source);
    } catch (error) {
      onProblem(spec.id, error instanceof SourcesConfigError ? error.problems.join('; ') : (error as Error).message);
    }
  }
  return sources;
}

/** The enabled sources that declare `reconcile`, their API credentials read from `env`; every problem reported. */
export async function reconcileSourcesFromDatabase(pool: Pool, env: Record<string, string | undefined>): Promise<ReconcileSource[]> {
  const problems: string[] = [];
  const sources = reconcileSourcesOf(await loadLiveSnapshot(pool, undefined, { secrets: false }), env, (_id, problem) =>
    problems.push(problem),
  );
  if (problems.length > 0) throw new SourcesConfigError(problems);
  return sources;
}

/** The enabled sources with their secrets opened; a secret that does not open is an error here, not left out. */
export async function webhookSourcesFromDatabase(pool: Pool, keyring: SecretKeyring | undefined): Promise<WebhookSource[]> {
  const snapshot = await loadLiveSnapshot(pool, keyring);
  if (snapshot.problems.length > 0) throw new SourcesConfigError(snapshot.problems);
  return snapshot.sources;
}
