import type { Admin } from 'kafkajs';
import { stringOption } from '../args.ts';
import type { CommandSpec } from '../command.ts';
import { connectedAdmin } from '../context.ts';
import { renderTable } from '../output.ts';

export interface LagRow {
  group: string;
  topic: string;
  partition: number;
  /** null: the group has committed nothing on this partition yet. */
  committed: string | null;
  low: string;
  end: string;
  /** Records not yet consumed; from the start of the log when nothing is committed. */
  lag: number;
}

/** The main group on the events topic and `<group>.retry.<n>` on `<events>.retry.<n>`. */
export function lagTargets(group: string, events: string, retries: string[]): Array<{ group: string; topic: string }> {
  return [{ group, topic: events }, ...retries.map((topic, i) => ({ group: `${group}.retry.${i + 1}`, topic }))];
}

export async function groupLag(admin: Admin, group: string, topic: string): Promise<LagRow[]> {
  const [watermarks, committed] = await Promise.all([
    admin.fetchTopicOffsets(topic),
    admin.fetchOffsets({ groupId: group, topics: [topic] }),
  ]);
  const byPartition = new Map((committed[0]?.partitions ?? []).map((p) => [p.partition, p.offset] as const));
  return watermarks
    .sort((a, b) => a.partition - b.partition)
    .map((w) => {
      const raw = byPartition.get(w.partition);
      const current = raw !== undefined && BigInt(raw) >= 0n ? raw : null;
      const from = current ?? w.low;
      const lag = BigInt(w.high) - BigInt(from);
      return { group, topic, partition: w.partition, committed: current, low: w.low, end: w.high, lag: Number(lag < 0n ? 0n : lag) };
    });
}

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
