// Reading the DLQ and replaying from it: shared by `bridge dlq` (services/cli) and the console's
// dead-letter page. Every function takes the clients it uses; none owns or closes them.
// plan.ts reads the DLQ and says what a replay sends; send.ts sends one partition at a time and
// reports each record's own answer; wait.ts settles each sent record by its first definitive
// signal; replay.ts runs the three in order.
export { inboxStatuses, SETTLED_OK, statusOf, type InboxStatus } from './inbox.ts';
export { readDlq, replayPlan, type ReplayPlanRow } from './plan.ts';
export { replayDeadLetters, type ReplayOptions } from './replay.ts';
export { acknowledgedOffsets, sendPerPartition, type SendResult } from './send.ts';
export type { DlqClients, ReplayOutcome } from './types.ts';
