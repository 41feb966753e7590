// The kit's one door into infra/: the repository root, the service bundles and their production
// flags, and the Postgres URL helper. infra/ files move between folders; only this file follows.
export { repoRoot } from '../../infra/paths.ts';
export { bundlePath } from '../../infra/build/build.ts';
export { serviceSpecs, type ServiceKind, type ServiceSpec } from '../../infra/dev/services.ts';
export { withDatabase } from '../../infra/provision/postgres.ts';
