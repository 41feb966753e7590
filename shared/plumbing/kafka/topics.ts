import kafkajs, { type Admin, type ITopicConfig } from 'kafkajs';
import { DEFAULTS } from '#plumbing/config/defaults.ts';

export interface TopicNames {
  events: string;
  retries: string[];
  dlq: string;
  applied: string;
}

export interface TopicSettings {
  /** Base name of the events topic; the retry chain and DLQ derive from it. */
  events: string;
  applied: string;
  eventsPartitions: number;
  retryLevels: number;
  replicationFactor: number;
  /** min.insync.replicas for every topic; with acks=all this is what makes an ack durable. */
  minInsyncReplicas: number;
}

export const defaultTopicSettings: TopicSettings = { ...DEFAULTS.topics };

/** The resource type that names a topic in the admin's describeConfigs and alterConfigs. */
export const TOPIC_RESOURCE_TYPE = kafkajs.ConfigResourceTypes.TOPIC;

export function topicNames(settings: Pick<TopicSettings, 'events' | 'applied' | 'retryLevels'>): TopicNames {
  return {
    events: settings.events,
    retries: Array.from({ length: settings.retryLevels }, (_, i) => `${settings.events}.retry.${i + 1}`),
    dlq: `${settings.events}.dlq`,
    applied: settings.applied,
  };
}

export interface TopicSpec {
  name: string;
  partitions: number;
  configs: Record<string, string>;
}

// The single source of truth for every topic the bridge uses: names, partitions, configs.
export function topicSpecs(settings: TopicSettings): TopicSpec[] {
  const names = topicNames(settings);
  const common = { 'min.insync.replicas': String(settings.minInsyncReplicas) };
  // Retry topics and the applied topic keep the events topic's partition count so a key
  // lands on the same partition number everywhere, which keeps traces easy to follow.
  const partitions = settings.eventsPartitions;
  return [
    { name: names.events, partitions, configs: { ...common, 'retention.ms': String(7 * 24 * 3600 * 1000) } },
    ...names.retries.map((name) => ({
      name,
      partitions,
      configs: { ...common, 'retention.ms': String(7 * 24 * 3600 * 1000) },
    })),
    { name: names.dlq, partitions, configs: { ...common, 'retention.ms': String(30 * 24 * 3600 * 1000) } },
    {
      name: names.applied,
      partitions,
      // Compacted: the latest record per resource key stays, so a new subscriber bootstraps current state.
      configs: { ...common, 'cleanup.policy': 'compact', 'min.compaction.lag.ms': '60000' },
    },
  ];
}

export interface EnsureTopicsResult {
  created: string[];
  existing: string[];
}

const RETRIABLE_CREATE_ERRORS = new Set(['UNKNOWN_TOPIC_OR_PARTITION', 'LEADER_NOT_AVAILABLE', 'NOT_CONTROLLER', 'REQUEST_TIMED_OUT']);

/**
 * Creates missing topics; never touches existing ones except to report a partition shortfall.
 * Idempotent, so a busy broker's transient metadata errors (which kafkajs does not retry for
 * createTopics with waitForLeaders) are met by running the whole check again.
 */
export async function ensureTopics(admin: Admin, specs: TopicSpec[], replicationFactor: number): Promise<EnsureTopicsResult> {
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await ensureTopicsOnce(admin, specs, replicationFactor);
    } catch (error) {
      const type = (error as { type?: string }).type;
      if (attempt >= 5 || type === undefined || !RETRIABLE_CREATE_ERRORS.has(type)) throw error;
      await new Promise((r) => setTimeout(r, 250 * attempt));
    }
  }
}

/** How long ensureTopics waits for the topics it created to show in the broker's metadata. */
const METADATA_WAIT_MS = 30_000;
const NOT_YET_IN_METADATA = new Set(['UNKNOWN_TOPIC_OR_PARTITION', 'LEADER_NOT_AVAILABLE']);

/**
 * CreateTopics answers once the controller has recorded the topics; a broker serves them in its
 * metadata a little later (KRaft brokers apply the record asynchronously; under load that took
 * over a second here). A client that subscribes in that gap gets UNKNOWN_TOPIC_OR_PARTITION, and
 * kafkajs's subscribe does not retry it: a worker started right after the topics were created
 * failed its start. So ensureTopics returns only once every created topic has a leader for every
 * partition.
 */
async function untilInMetadata(admin: Admin, names: string[], timeoutMs = METADATA_WAIT_MS): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  for (let delay = 50; ; delay = Math.min(delay * 2, 1000)) {
    let seen = 0;
    try {
      const { topics } = await admin.fetchTopicMetadata({ topics: names });
      seen = topics.filter((t) => t.partitions.length > 0 && t.partitions.every((p) => p.leader >= 0)).length;
      if (seen === names.length) return;
    } catch (error) {
      if (!NOT_YET_IN_METADATA.has((error as { type?: string }).type ?? '')) throw error;
    }
    if (performance.now() >= deadline) {
      throw new Error(
        `created topics not in the broker's metadata with leaders after ${timeoutMs} ms (${seen} of ${names.length}): ${names.join(', ')}`,
      );
    }
    await new Promise((r) => setTimeout(r, delay));
  }
}

async function ensureTopicsOnce(admin: Admin, specs: TopicSpec[], replicationFactor: number): Promise<EnsureTopicsResult> {
  const existing = new Set(await admin.listTopics());
  const missing = specs.filter((s) => !existing.has(s.name));
  if (missing.length > 0) {
    const topics: ITopicConfig[] = missing.map((s) => ({
      topic: s.name,
      numPartitions: s.partitions,
      replicationFactor,
      configEntries: Object.entries(s.configs).map(([name, value]) => ({ name, value })),
    }));
    try {
      await admin.createTopics({ topics, waitForLeaders: true });
    } catch (error) {
      // Another process may have created them between list and create; that is fine.
      if ((error as { type?: string }).type !== 'TOPIC_ALREADY_EXISTS') throw error;
    }
    await untilInMetadata(
      admin,
      missing.map((s) => s.name),
    );
  }
  const present = specs.filter((s) => existing.has(s.name));
  if (present.length > 0) {
    const metadata = await admin.fetchTopicMetadata({ topics: present.map((s) => s.name) });
    for (const topic of metadata.topics) {
      const spec = present.find((s) => s.name === topic.name);
      if (spec && topic.partitions.length < spec.partitions) {
        throw new Error(
          `topic ${topic.name} has ${topic.partitions.length} partitions, expected ${spec.partitions}; ` +
            'increase it deliberately (it moves keys between partitions)',
        );
      }
    }
  }
  return { created: missing.map((s) => s.name), existing: present.map((s) => s.name) };
}
