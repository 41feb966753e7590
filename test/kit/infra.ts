// The kit's one door into infra/: the repository root, the service bundles and their production
// flags, the local broker and Postgres helpers, the dev seed. infra/ files move between folders;
// only this file follows. (A test of an infra/ module imports that module itself.)
export { repoRoot } from '../../infra/paths.ts';
export { bundlePath } from '../../infra/build/build.ts';
export { buildServices, serviceSpecs, type ServiceKind, type ServiceSpec } from '../../infra/dev/services.ts';
export { DEV_SEED_ACTOR, seedDevSources } from '../../infra/dev/bootstrap.ts';
export { canConnect, ensureDatabase, resolvePostgres, withDatabase } from '../../infra/provision/postgres.ts';
export { LocalKafka, portOpen, singleNodeDefaults } from '../../infra/provision/kafka/local-kafka.ts';
export { dockerEngineAvailable } from '../../infra/provision/docker.ts';
