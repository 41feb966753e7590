import { CommandFailed, flag, intOption, requiredOption, UsageError } from '../args.ts';
import type { CommandSpec } from '../command.ts';
import { connectedAdmin } from '../context.ts';
import { describeTarget, groupIsInactive, parseResetTarget, planReset } from '../offset-plan.ts';
import { renderTable } from '../output.ts';

export const offsetsReset: CommandSpec = {
  path: ['offsets', 'reset'],
  summary: "move a consumer group's committed offsets on one topic (prints the plan unless --execute)",
  usage: '--group G --topic T --to <earliest|latest|ISO time|offset> [--partition P] [--execute]',
  details: [
    'Like kafka-consumer-groups --reset-offsets: without --execute (or with --dry-run) it only prints',
    'current vs new offset per partition. With --execute it refuses while the group has active members',
    '(stop the workers first). A time resolves to the first record at or after it on each partition;',
    "an explicit offset outside a partition's range is moved to the nearest end.",
  ].join('\n'),
  examples: [
    'bridge offsets reset --group theme-applier --topic theme.events --to 2026-01-31T12:00:00Z',
    'bridge offsets reset --group theme-applier --topic theme.events --to earliest --execute',
  ],
  options: {
    group: { type: 'string', description: 'consumer group whose offsets move', valueName: 'G' },
    topic: { type: 'string', description: 'topic whose offsets move', valueName: 'T' },
    to: { type: 'string', description: 'earliest | latest | offset | ISO time with an explicit offset (Z or ±HH:MM)', valueName: 'target' },
    partition: { type: 'string', description: 'only this partition (default: all)', valueName: 'P' },
    execute: { type: 'boolean', description: 'apply the plan (otherwise only print it)' },
  },
  mutating: true,
  async run(args, ctx) {
    const group = requiredOption(args, 'group');
    const topic = requiredOption(args, 'topic');
    const target = parseResetTarget(requiredOption(args, 'to'));
    const onlyPartition = intOption(args, 'partition');
    const execute = flag(args, 'execute') && !flag(args, 'dry-run');

    const admin = await connectedAdmin(ctx);
    const topics = await admin.listTopics();
    if (!topics.includes(topic)) throw new CommandFailed(`topic ${topic} does not exist`);
    let watermarks = await admin.fetchTopicOffsets(topic);
    if (onlyPartition !== undefined) {
      watermarks = watermarks.filter((w) => w.partition === onlyPartition);
      if (watermarks.length === 0) throw new UsageError(`topic ${topic} has no partition ${onlyPartition}`);
    }
    const [committedList] = await admin.fetchOffsets({ groupId: group, topics: [topic] });
    const committed = new Map((committedList?.partitions ?? []).map((p) => [p.partition, p.offset] as const));
    const byTimestamp =
      target.kind === 'time'
        ? new Map((await admin.fetchTopicOffsetsByTimestamp(topic, target.timestamp)).map((p) => [p.partition, p.offset] as const))
        : undefined;
    const plan = planReset({ target, watermarks, committed, byTimestamp });
    const { groups } = await admin.describeGroups([group]);
    const state = groups[0]?.state ?? 'Dead';
    const members = groups[0]?.members.length ?? 0;
    const active = !groupIsInactive(state);

    const table = renderTable(
      ['partition', 'current', 'new', 'low', 'high', 'note'],
      plan.map((r) => [r.partition, r.current, r.target, r.low, r.high, r.clamped ? 'clamped to range' : '']),
    );
    const header = `group ${group} (${state}, ${members} member${members === 1 ? '' : 's'}), topic ${topic}, to ${describeTarget(target)}`;

    if (!execute) {
      ctx.out.result(
        { executed: false, group, topic, target: describeTarget(target), group_state: state, members, plan },
        `${header}\n${table}\n${
          active ? 'warning: the group has active members; --execute will refuse until they stop\n' : ''
        }(plan only: add --execute to apply)`,
      );
      return;
    }
    if (active) {
      throw new CommandFailed(
        `refusing to reset offsets: group ${group} has ${members} active member(s) (state ${state}); stop its consumers first`,
        { group, state, members },
      );
    }
    // setOffsets itself re-checks the group state inside the coordinator, which closes the race
    // with a consumer starting between describeGroups and here.
    await admin.setOffsets({ groupId: group, topic, partitions: plan.map((r) => ({ partition: r.partition, offset: r.target })) });
    const [after] = await admin.fetchOffsets({ groupId: group, topics: [topic] });
    const afterMap = new Map((after?.partitions ?? []).map((p) => [p.partition, p.offset] as const));
    const mismatched = plan.filter((r) => afterMap.get(r.partition) !== r.target);
    if (mismatched.length > 0) {
      throw new CommandFailed(`offsets were not set as planned on partitions ${mismatched.map((r) => r.partition).join(', ')}`);
    }
    ctx.out.result({ executed: true, group, topic, target: describeTarget(target), plan }, `${header}\n${table}\noffsets reset.`);
  },
};
