// One-off reads of the sources in Postgres, for the tools that run a command and exit (the CLI's
// `send` and `reconcile`): the same snapshot a running service loads, resolved the same way.
import type { Pool } from 'pg';
import { loadLiveSnapshot } from './live.ts';
import type { SecretKeyring } from './secret-box.ts';
import { toReconcileSource } from './source-spec.ts';
import { SourcesConfigError, type ReconcileSource, type WebhookSource } from './sources-config.ts';

/** The enabled sources that declare `reconcile`, their API credentials read from `env`; every problem reported. */
export async function reconcileSourcesFromDatabase(pool: Pool, env: Record<string, string | undefined>): Promise<ReconcileSource[]> {
  const snapshot = await loadLiveSnapshot(pool, undefined, { secrets: false });
  const problems: string[] = [];
  const sources: ReconcileSource[] = [];
  for (const spec of snapshot.specs) {
    try {
      const source = toReconcileSource(spec, env);
      if (source !== undefined) sources.push(source);
    } catch (error) {
      problems.push(...(error instanceof SourcesConfigError ? error.problems : [(error as Error).message]));
    }
  }
  if (problems.length > 0) throw new SourcesConfigError(problems);
  return sources;
}

/** The enabled sources with their secrets opened; a secret that does not open is an error here, not left out. */
export async function webhookSourcesFromDatabase(pool: Pool, keyring: SecretKeyring | undefined): Promise<WebhookSource[]> {
  const snapshot = await loadLiveSnapshot(pool, keyring);
  if (snapshot.problems.length > 0) throw new SourcesConfigError(snapshot.problems);
  return snapshot.sources;
}
