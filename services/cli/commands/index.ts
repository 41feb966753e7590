import type { CommandSpec } from '../command.ts';
import { dlqList, dlqReplay, dlqShow } from './dlq.ts';
import { lagCommand } from './lag.ts';
import { migrateCommand } from './migrate.ts';
import { offsetsReset } from './offsets.ts';
import { orderingSwitch } from './ordering.ts';
import { pruneCommand } from './prune.ts';
import { reconcileCommand } from './reconcile.ts';
import { reprocessCommand } from './reprocess.ts';
import { sendCommand } from './send.ts';
import { sourcesCommands } from './sources.ts';
import { tokensCommands } from './tokens.ts';
import { topicsCreate } from './topics.ts';
import { traceCommand } from './trace.ts';

export const allCommands: CommandSpec[] = [
  topicsCreate,
  migrateCommand,
  offsetsReset,
  lagCommand,
  reprocessCommand,
  traceCommand,
  reconcileCommand,
  orderingSwitch,
  dlqList,
  dlqShow,
  dlqReplay,
  pruneCommand,
  sendCommand,
  ...sourcesCommands,
  ...tokensCommands,
];
