// `npm run build`: the release build, dist/ (infra/build/dist.ts), which runs wherever it is copied
// (docs/operations.md, Production). Prints the launchers' paths, one per line.
import path from 'node:path';
import { buildDist } from './dist.ts';

for (const file of await buildDist()) console.log(path.relative(process.cwd(), file));
