// `npm run build`: every service's bundle (infra/build.ts), one path per line, for running the
// services without npm start (docs/operations.md, Production).
import path from 'node:path';
import { repoRoot } from './paths.ts';
import { buildServices } from './services.ts';

for (const file of await buildServices()) console.log(path.relative(repoRoot, file));
