import { ensureTopics, topicSpecs } from '#plumbing/kafka/topics.ts';
import { flag } from '../args.ts';
import type { CommandSpec } from '../command.ts';
import { connectedAdmin } from '../context.ts';
import { renderTable } from '../output.ts';

export const topicsCreate: CommandSpec = {
  path: ['topics', 'create'],
  summary: 'create every topic the bridge uses (events, retry chain, DLQ, applied); existing ones are left alone',
  usage: '[--dry-run]',
  details: 'The same ensureTopics the services run at start-up. Names and sizes come from TOPIC_* variables.',
  examples: ['bridge topics create --dry-run', 'bridge topics create'],
  options: {},
  mutating: true,
  async run(args, ctx) {
    const settings = ctx.topicSettings();
    const specs = topicSpecs(settings);
    const admin = await connectedAdmin(ctx);
    if (flag(args, 'dry-run')) {
      const existing = new Set(await admin.listTopics());
      const plan = specs.map((s) => ({
        topic: s.name,
        partitions: s.partitions,
        replication_factor: settings.replicationFactor,
        configs: s.configs,
        action: existing.has(s.name) ? 'exists' : 'create',
      }));
      ctx.out.result(
        { dry_run: true, topics: plan },
        `${renderTable(
          ['topic', 'partitions', 'replication', 'action', 'configs'],
          plan.map((p) => [
            p.topic,
            p.partitions,
            p.replication_factor,
            p.action,
            Object.entries(p.configs)
              .map(([k, v]) => `${k}=${v}`)
              .join(','),
          ]),
        )}\n(dry run: nothing created)`,
      );
      return;
    }
    const result = await ensureTopics(admin, specs, settings.replicationFactor);
    ctx.out.result(
      { created: result.created, existing: result.existing },
      [
        result.created.length ? `created: ${result.created.join(', ')}` : 'created: none',
        result.existing.length ? `already existed: ${result.existing.join(', ')}` : '',
      ]
        .filter(Boolean)
        .join('\n'),
    );
  },
};
