// bench:e2e's floor: the path of a record through Kafka alone, measured beside the bridge in the
// same run. For each rate, on fresh topics: an open-loop load of records of the bridge's size,
// each produced with acks=all by an idempotent producer whose concurrent sends are coalesced as
// the ingress's are; consumed by a consumer-group member in its own process and re-produced there
// in a Kafka transaction, one per fetch, with the relay's producer (floor-relay.ts); read by a
// read_committed consumer as the bridge's applied records are (observe.ts). Every client comes
// from shared/plumbing/kafka, so the floor runs on the client and settings the bridge runs on.
// Latency counts from the due time to the read_committed consumer's receipt.
import { spawn, type ChildProcess } from 'node:child_process';
import type { Admin, Kafka, Message, Producer } from '#plumbing/kafka/types.ts';
import { createIdempotentProducer } from '#plumbing/kafka/producers.ts';
import { PartitionedSender, topicLayouts } from '#plumbing/kafka/partitioned-send.ts';
import { ensureTopics, topicSpecs, type TopicSettings } from '#plumbing/kafka/topics.ts';
import { APPLIED_HEADER_EVENT_ID } from '#domain/apply/index.ts';
import { repoRoot } from '../../infra/paths.ts';
import { BODY_BYTES, untilNextDue, wallNow } from './load.ts';
import { watchApplied, type AppliedSeen } from './observe.ts';
import { SerialBatcher } from './serial-batcher.ts';
import type { FloorRelayCommand, FloorRelayReply } from './floor-relay.ts';

export interface FloorSent {
  id: string;
  /** When the record was due (wall ms). */
  due: number;
  /** When its send resolved: acked by the broker with acks=all (wall ms). */
  acked?: number;
  error?: string;
}

export interface FloorPhaseResult {
  name: string;
  rate: number;
  sent: FloorSent[];
  /** Read by the read_committed consumer, by record id. */
  seen: Map<string, AppliedSeen>;
  duplicates: number;
  started: number;
  sendLagP99Ms: number;
  drainedAll: boolean;
  drainedMs: number;
  topics: string[];
}

export interface FloorOptions {
  kafka: Kafka;
  brokers: string[];
  /** The bridge's topic settings: partitions, replication and min.insync.replicas come from it. */
  settings: TopicSettings;
  stamp: string;
  /** How to start floor-relay.ts: node arguments and its bundle (or --import tsx and its source). */
  relayCommand: string[];
  drainTimeoutMs: number;
  log: (line: string) => void;
}

/** The floor's long-lived clients: warmed once, then a fresh pair of topics and groups per phase. */
export class Floor {
  readonly #o: FloorOptions;
  readonly #admin: Admin;
  readonly #producer: Producer;
  readonly #sender: PartitionedSender;
  readonly #sends: SerialBatcher<Message>;
  #relay: ChildProcess | undefined;
  #replies: Array<(reply: FloorRelayReply) => void> = [];
  /** The current phase's input topic. */
  #input = '';
  readonly topics: string[] = [];
  readonly groups: string[] = [];

  constructor(options: FloorOptions) {
    this.#o = options;
    this.#admin = options.kafka.admin();
    this.#producer = createIdempotentProducer(options.kafka);
    this.#sender = new PartitionedSender(this.#producer, topicLayouts(this.#admin));
    this.#sends = new SerialBatcher<Message>(async (messages) => {
      await this.#sender.send({ topic: this.#input, acks: -1, messages });
    });
  }

  /** The relay process's pid (for its CPU), once started. */
  get relayPid(): number | undefined {
    return this.#relay?.pid;
  }

  async start(): Promise<void> {
    await this.#admin.connect();
    await this.#producer.connect();
    this.#relay = spawn(process.execPath, this.#o.relayCommand, {
      cwd: repoRoot,
      env: {
        ...process.env,
        KAFKA_BROKERS: this.#o.brokers.join(','),
        FLOOR_TRANSACTIONAL_ID: `bench.floor.${this.#o.stamp}.relay`,
        // Warnings only, and on stderr: the bench's stdout carries its report.
        LOG_LEVEL: 'warn',
      },
      stdio: ['ignore', 2, 'inherit', 'ipc'],
    });
    this.#relay.on('message', (reply: FloorRelayReply) => this.#replies.shift()?.(reply));
    await this.#reply();
  }

  #reply(command?: FloorRelayCommand): Promise<FloorRelayReply> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('the floor relay did not answer within 60 s')), 60_000);
      this.#replies.push((reply) => {
        clearTimeout(timer);
        if ('failed' in reply) reject(new Error(`floor relay: ${reply.failed}`));
        else resolve(reply);
      });
      if (command) this.#relay!.send(command);
    });
  }

  /** One phase: fresh topics and groups, `rate` records a second for `durationMs`, drained. */
  async phase(name: string, rate: number, durationMs: number): Promise<FloorPhaseResult> {
    const tag = name.replace(/[^\w]+/g, '-').replace(/-+$/, '');
    const input = `bench.floor.${this.#o.stamp}.${tag}.in`;
    const output = `bench.floor.${this.#o.stamp}.${tag}.out`;
    const s = this.#o.settings;
    // The events and applied topics' own specs (partitions, min.insync.replicas, compaction).
    const specs = topicSpecs({ ...s, events: input, applied: output, retryLevels: 0 }).filter((t) => t.name === input || t.name === output);
    await ensureTopics(this.#admin, specs, s.replicationFactor);
    this.topics.push(input, output);
    const relayGroup = `bench-floor-relay-${this.#o.stamp}-${tag}`;
    const readerGroup = `bench-floor-reader-${this.#o.stamp}-${tag}`;
    this.groups.push(relayGroup, readerGroup);
    await this.#reply({ start: { input, output, group: relayGroup } });
    const reader = await watchApplied(this.#o.kafka, output, readerGroup);
    this.#input = input;
    try {
      const load = await this.#openLoop(tag, rate, durationMs);
      const acked = load.sent.filter((x) => x.acked !== undefined);
      const drainStart = wallNow();
      let drainedAll = false;
      while (wallNow() - drainStart < this.#o.drainTimeoutMs) {
        if (acked.every((x) => reader.seen.has(x.id))) {
          drainedAll = true;
          break;
        }
        await new Promise((r) => setTimeout(r, 50));
      }
      const drainedMs = wallNow() - drainStart;
      this.#o.log(
        `${name}: ${acked.length}/${load.sent.length} acked, ${drainedAll ? 'all' : 'NOT all'} read committed within ${(drainedMs / 1000).toFixed(1)} s`,
      );
      return {
        name,
        rate,
        ...load,
        seen: reader.seen,
        duplicates: reader.duplicates,
        drainedAll,
        drainedMs,
        topics: [input, output],
      };
    } finally {
      await reader.stop().catch(() => {});
      await this.#reply({ stop: true }).catch(() => {});
    }
  }

  /** Records due at start + i / rate, each sent then (coalesced with whatever else is due), open loop. */
  async #openLoop(tag: string, rate: number, durationMs: number): Promise<{ sent: FloorSent[]; started: number; sendLagP99Ms: number }> {
    const total = Math.max(1, Math.round((rate * durationMs) / 1000));
    const value = Buffer.alloc(BODY_BYTES, 'x');
    const sent: FloorSent[] = [];
    const lags = new Float64Array(total);
    const pending: Array<Promise<void>> = [];
    const started = wallNow() + 20;
    const fire = (i: number, due: number) => {
      const id = `floor-${tag}-${i}`;
      const entry: FloorSent = { id, due };
      sent.push(entry);
      lags[i] = wallNow() - due;
      pending.push(
        this.#sends
          .add([{ key: `theme_floor_${i}`, value, headers: { [APPLIED_HEADER_EVENT_ID]: id } }])
          .then(() => {
            entry.acked = wallNow();
          })
          .catch((error: Error) => {
            entry.error = error.message;
          }),
      );
    };
    let i = 0;
    while (i < total) {
      const now = wallNow();
      for (let due = started + (i * 1000) / rate; i < total && due <= now; due = started + (i * 1000) / rate) {
        fire(i, due);
        i += 1;
      }
      if (i < total) await untilNextDue(started + (i * 1000) / rate - wallNow());
    }
    await Promise.all(pending);
    const sorted = lags.sort();
    return { sent, started, sendLagP99Ms: sorted[Math.floor(0.99 * (total - 1))]! };
  }

  /** Stops the relay process and the clients; deletes the floor's topics and groups unless `keep`. */
  async stop(keep: boolean): Promise<void> {
    if (this.#relay && this.#relay.exitCode === null) {
      const exited = new Promise((r) => this.#relay!.once('exit', r));
      this.#relay.send({ exit: true } satisfies FloorRelayCommand);
      await Promise.race([exited, new Promise((r) => setTimeout(r, 10_000))]);
      if (this.#relay.exitCode === null) this.#relay.kill('SIGKILL');
    }
    await this.#producer.disconnect().catch(() => {});
    if (!keep) {
      if (this.topics.length) await this.#admin.deleteTopics({ topics: this.topics }).catch(() => {});
      if (this.groups.length) await this.#admin.deleteGroups(this.groups).catch(() => {});
    }
    await this.#admin.disconnect().catch(() => {});
  }
}
