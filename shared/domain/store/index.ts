// The store owns the Postgres schema: its migrations (migrations/, migrate.ts) and every statement
// against it, one module per table family. Each function holds its SQL next to its parameters.
// columns.ts (the column specs of the wide statements) is imported on its own.
export * from './anomalies.ts';
export * from './chunk.ts';
export * from './inbox.ts';
export * from './migrate.ts';
export * from './operator-views.ts';
export * from './outbox.ts';
export * from './reconcile-pulls.ts';
export * from './retention.ts';
export * from './session.ts';
export * from './state.ts';
export * from './sources.ts';
