import { groupLag, lagTargets, type LagRow } from '#plumbing/kafka/lag.ts';
import { stringOption } from '../args.ts';
import type { CommandSpec } from '../command.ts';
import { connectedAdmin } from '../context.ts';
import { renderTable } from '../output.ts';

export const lagCommand: CommandSpec = {
  path: ['lag'],
  summary: 'consumer lag per topic and partition for the main group and its retry groups',
  usage: '[--group G]',
  details: 'Rows: committed offset, log end and lag. A partition the group never committed shows "-" and counts lag from the log start.',
  examples: ['bridge lag', 'bridge lag --group theme-applier --json'],
  options: { group: { type: 'string', description: 'consumer group (default: CONSUMER_GROUP)', valueName: 'G' } },
  mutating: false,
  async run(args, ctx) {
    const group = stringOption(args, 'group') ?? ctx.consumerGroup();
    const names = ctx.topicNames();
    const admin = await connectedAdmin(ctx);
    const existing = new Set(await admin.listTopics());
    const targets = lagTargets(group, names.events, names.retries);
    const missing = targets.filter((t) => !existing.has(t.topic)).map((t) => t.topic);
    const rows: LagRow[] = [];
    for (const t of targets.filter((x) => existing.has(x.topic))) rows.push(...(await groupLag(admin, t.group, t.topic)));
    const groupsState = await admin.describeGroups(targets.map((t) => t.group));
    const order = targets.map((t) => t.group);
    const groups = groupsState.groups
      .map((g) => ({ group: g.groupId, state: g.state, members: g.members.length }))
      .sort((a, b) => order.indexOf(a.group) - order.indexOf(b.group));
    const total = rows.reduce((sum, r) => sum + r.lag, 0);
    ctx.out.result(
      { group, total_lag: total, groups, partitions: rows, missing_topics: missing },
      [
        renderTable(
          ['group', 'state', 'members'],
          groups.map((g) => [g.group, g.state, g.members]),
        ),
        '',
        renderTable(
          ['group', 'topic', 'partition', 'committed', 'end', 'lag'],
          rows.map((r) => [r.group, r.topic, r.partition, r.committed, r.end, r.lag]),
        ),
        '',
        `total lag: ${total}`,
        ...(missing.length ? [`missing topics: ${missing.join(', ')} (run bridge topics create)`] : []),
      ].join('\n'),
    );
  },
};
