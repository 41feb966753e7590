import { fileURLToPath } from 'node:url';
import path from 'node:path';

export const repoRoot = path.resolve(fileURLToPath(new URL('.', import.meta.url)), '..');
/** Git-ignored: downloaded jars, broker data, embedded Postgres data. */
export const cacheDir = process.env.BRIDGE_CACHE_DIR ?? path.join(repoRoot, '.cache');
