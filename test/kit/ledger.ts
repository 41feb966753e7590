/**
 * What the fault tests share: a worker run as a real process (started, SIGKILLed and restarted
 * with every start and exit counted), a log of every answer the ingress gave with the fault
 * windows it fell in, and the ledger checks (events topic, inbox, applied topic, DLQ).
 */
import type { ChildProcess } from 'node:child_process';
import type { Kafka } from '#plumbing/kafka/types.ts';
import type pg from 'pg';
import { readTopic, type ReadRecord } from './kafka.ts';
import { freePort } from './ports.ts';
import { type Answer as HttpAnswer } from './ingress.ts';
import { spawnService } from './service.ts';
import { sleep } from './eventually.ts';

// ---------------------------------------------------------------------------------------------
// The worker as a process (services/worker/main.ts)

/**
 * How long a SIGTERMed worker may take to exit: docs/operations.md promises the drain fits the
 * default 30 s grace period; twice that, so a slow machine is not what fails.
 */
const STOP_GRACE_MS = 60_000;

export interface WorkerExit {
  at: number;
  code: number | null;
  signal: NodeJS.Signals | null;
  /** A SIGKILL the test sent; anything else is the worker dying by itself. */
  expected: boolean;
  /** The last output of the process that exited. */
  log: string;
}

export interface WorkerProcessOptions {
  env: Record<string, string>;
  /**
   * After a kill the test made: start again by itself (as a supervisor would), or wait for the
   * test to call start(). An exit the test did not cause is always restarted (and recorded), so a
   * run goes on to its checks, which then report it.
   */
  restartAfterKill: boolean;
  logLimit?: number;
}

export class WorkerProcess {
  readonly #options: WorkerProcessOptions;
  #child: ChildProcess | undefined;
  #adminPort: number | undefined;
  #killing: ChildProcess | undefined;
  #terminating: ChildProcess | undefined;
  #stopping = false;
  #output: () => string = () => '';
  #starting: Promise<void> | undefined;
  readonly #stuckStops: string[] = [];
  starts = 0;
  kills = 0;
  /** Graceful restarts the test made (restart()). */
  restarts = 0;
  readonly exits: WorkerExit[] = [];

  constructor(options: WorkerProcessOptions) {
    this.#options = options;
  }

  get output(): string {
    return this.#output();
  }

  get unexpectedExits(): WorkerExit[] {
    return this.exits.filter((e) => !e.expected);
  }

  /** Starts one process (no-op while one runs or is starting). */
  start(): Promise<void> {
    if (this.#stopping || this.#child) return Promise.resolve();
    this.#starting ??= this.#spawn().finally(() => {
      this.#starting = undefined;
    });
    return this.#starting;
  }

  async #spawn(): Promise<void> {
    const adminPort = await freePort();
    if (this.#stopping) return;
    this.starts += 1;
    const limit = this.#options.logLimit ?? 30_000;
    const service = spawnService('worker', { ...process.env, ...this.#options.env, ADMIN_PORT: String(adminPort) }, { keepChars: limit });
    const child = service.child;
    this.#output = service.output;
    child.once('exit', (code, signal) => {
      const terminated = this.#terminating === child && code === 0;
      const expected = (this.#killing === child && signal === 'SIGKILL') || terminated;
      if (this.#killing === child) this.#killing = undefined;
      if (this.#terminating === child) this.#terminating = undefined;
      if (this.#child === child) {
        this.#child = undefined;
        this.#adminPort = undefined;
      }
      if (this.#stopping) return;
      this.exits.push({ at: Date.now(), code, signal, expected, log: service.output() });
      // restart() starts the next process itself.
      if (!terminated && (!expected || this.#options.restartAfterKill)) setTimeout(() => void this.start(), 100);
    });
    this.#child = child;
    this.#adminPort = adminPort;
  }

  /** /readyz of the running process answers 200 (consumer group joined, database, relay). */
  async ready(): Promise<boolean> {
    const port = this.#adminPort;
    if (port === undefined || !this.#child) return false;
    try {
      const res = await fetch(`http://127.0.0.1:${port}/readyz`, { signal: AbortSignal.timeout(2_000) });
      await res.text();
      return res.status === 200;
    } catch {
      return false;
    }
  }

  /** The running process's /metrics (Prometheus text); its counters start again at every start. */
  async metrics(): Promise<string> {
    const port = this.#adminPort;
    if (port === undefined) throw new Error('worker not running');
    const res = await fetch(`http://127.0.0.1:${port}/metrics`, { signal: AbortSignal.timeout(5_000) });
    return res.text();
  }

  async waitReady(timeoutMs = 90_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      await this.#starting;
      if (await this.ready()) return;
      await sleep(200);
    }
    throw new Error(`worker not ready within ${timeoutMs} ms; its output:\n${this.#output().slice(-4_000)}`);
  }

  /** SIGKILL of a running, ready worker; resolves once it has exited. */
  async kill(): Promise<void> {
    await this.waitReady();
    const child = this.#child!;
    const exited = new Promise((r) => child.once('exit', r));
    this.#killing = child;
    this.kills += 1;
    child.kill('SIGKILL');
    await exited;
  }

  /** The running process's pid (undefined while none runs). */
  get pid(): number | undefined {
    return this.#child?.pid;
  }

  /** SIGSTOP / SIGCONT of the running process: a frozen machine, sockets open and silent. */
  freeze(): void {
    this.#child?.kill('SIGSTOP');
  }

  thaw(): void {
    this.#child?.kill('SIGCONT');
  }

  /**
   * SIGTERM to a ready worker (as a rolling restart sends it), its exit 0, then a new process. One
   * still running STOP_GRACE_MS after the SIGTERM is SIGKILLed, as an orchestrator does when the
   * grace period ends, and reported by restartProblems() with its last words, instead of holding
   * the test until its own timeout.
   */
  async restart(): Promise<void> {
    await this.waitReady();
    const child = this.#child!;
    const exited = new Promise((r) => child.once('exit', r));
    this.#terminating = child;
    this.restarts += 1;
    child.kill('SIGTERM');
    const timer = setTimeout(() => {
      this.#stuckStops.push(
        `worker pid ${child.pid} still running ${STOP_GRACE_MS} ms after SIGTERM, SIGKILLed; its last output:\n${this.#output().slice(-3_000)}`,
      );
      this.#killing = child;
      child.kill('SIGKILL');
    }, STOP_GRACE_MS);
    await exited;
    clearTimeout(timer);
    await this.start();
  }

  /**
   * Every exit was a kill or a restart of the test, and every one was followed by exactly one
   * start (the first start is the test's own).
   */
  restartProblems(): string[] {
    const problems = [...this.#stuckStops];
    problems.push(
      ...this.unexpectedExits.map(
        (e) =>
          `worker exited by itself at ${new Date(e.at).toISOString()} (code ${e.code}, signal ${e.signal}); its last output:\n${e.log.slice(-3_000)}`,
      ),
    );
    const expectedExits = this.exits.filter((e) => e.expected).length;
    if (expectedExits !== this.kills + this.restarts)
      problems.push(`${this.kills} kills and ${this.restarts} restarts but ${expectedExits} exits by SIGKILL or SIGTERM`);
    if (this.starts !== 1 + this.exits.length) problems.push(`${this.starts} starts for ${this.exits.length} exits (want 1 + exits)`);
    return problems;
  }

  async stop(): Promise<void> {
    this.#stopping = true;
    await this.#starting?.catch(() => {});
    const child = this.#child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((r) => child.once('exit', r));
    // A frozen process (freeze()) acts on SIGTERM only once it runs again.
    child.kill('SIGCONT');
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(timer);
  }
}

/** Sum of a metric's samples in Prometheus text whose labels include `labels`. */
export function metricSum(text: string, name: string, labels: Record<string, string> = {}): number {
  let sum = 0;
  for (const line of text.split('\n')) {
    const match = /^([a-zA-Z_:][\w:]*)(\{[^}]*\})?\s+(\S+)/.exec(line);
    if (!match || match[1] !== name) continue;
    const labelText = match[2] ?? '';
    if (Object.entries(labels).every(([k, v]) => labelText.includes(`${k}="${v}"`))) sum += Number(match[3]);
  }
  return sum;
}

// ---------------------------------------------------------------------------------------------
// Every answer, and the fault windows

export interface AnswerRecord {
  sentAt: number;
  answeredAt: number;
  /** 0 when the request itself failed (connection refused, reset...). */
  status: number;
  retryAfter: string | undefined;
  error?: string;
  eventId: string;
  resource: string;
  version: number;
}

export interface FaultWindow {
  name: string;
  start: number;
  end?: number;
}

export function answerRecord(
  sentAt: number,
  answer: HttpAnswer | Error,
  event: { eventId: string; resource: string; version: number },
): AnswerRecord {
  const answeredAt = Date.now();
  if (answer instanceof Error) return { sentAt, answeredAt, status: 0, retryAfter: undefined, error: answer.message, ...event };
  const retryAfter = answer.headers['retry-after'];
  return { sentAt, answeredAt, status: answer.status, retryAfter: Array.isArray(retryAfter) ? retryAfter.join(',') : retryAfter, ...event };
}

const is2xx = (a: AnswerRecord) => a.status >= 200 && a.status < 300;

export class AnswerLog {
  readonly answers: AnswerRecord[] = [];
  readonly windows: FaultWindow[] = [];

  record(answer: AnswerRecord): void {
    this.answers.push(answer);
  }

  open(name: string): FaultWindow {
    const window: FaultWindow = { name, start: Date.now() };
    this.windows.push(window);
    return window;
  }

  close(window: FaultWindow): void {
    window.end = Date.now();
  }

  /** The first window a request overlaps (sent before the window closed, answered after it opened). */
  windowOf(a: AnswerRecord): FaultWindow | undefined {
    return this.windows.find((w) => a.answeredAt >= w.start && a.sentAt <= (w.end ?? Infinity));
  }

  accepted(): AnswerRecord[] {
    return this.answers.filter(is2xx);
  }

  /**
   * Outside the fault windows at least `floor` of the requests are answered 2xx, and every answer
   * that is not a 2xx, inside a window or not, is a 503 with Retry-After (never a 500, a 4xx or a
   * dropped connection). `since` limits the check to the requests sent from then on.
   */
  acceptanceProblems(floor: number, since = 0): string[] {
    const problems: string[] = [];
    const considered = this.answers.filter((a) => a.sentAt >= since);
    const outside = considered.filter((a) => this.windowOf(a) === undefined);
    const ok = outside.filter(is2xx).length;
    if (outside.length === 0) problems.push('no request outside the fault windows');
    else if (ok / outside.length < floor)
      problems.push(`outside the fault windows only ${ok} of ${outside.length} requests were answered 2xx (floor ${floor * 100}%)`);
    const wrong = considered.filter((a) => !is2xx(a) && (a.status !== 503 || !a.retryAfter));
    if (wrong.length > 0) {
      const kinds = new Map<string, number>();
      for (const a of wrong) {
        const kind = `${a.status}${a.error ? ` ${a.error}` : ''}${a.status === 503 ? ' without Retry-After' : ''}`;
        kinds.set(kind, (kinds.get(kind) ?? 0) + 1);
      }
      problems.push(`${wrong.length} answers neither 2xx nor 503 with Retry-After: ${JSON.stringify(Object.fromEntries(kinds))}`);
    }
    return problems;
  }

  /** `requests 1200, accepted 1100, refused 100; outside windows 900/900; broker stop 120/200 ...` */
  summary(since = 0): string {
    const considered = this.answers.filter((a) => a.sentAt >= since);
    const count = (list: AnswerRecord[]) => `${list.filter(is2xx).length}/${list.length}`;
    const parts = [
      `requests ${considered.length}, accepted ${considered.filter(is2xx).length}, refused ${considered.filter((a) => !is2xx(a)).length}`,
      `outside windows ${count(considered.filter((a) => this.windowOf(a) === undefined))} accepted`,
    ];
    for (const w of this.windows) {
      if ((w.end ?? Infinity) < since) continue;
      const inside = considered.filter((a) => this.windowOf(a) === w);
      const seconds = (((w.end ?? Date.now()) - w.start) / 1000).toFixed(1);
      parts.push(`${w.name} (${seconds} s) ${count(inside)}`);
    }
    return parts.join('; ');
  }
}

// ---------------------------------------------------------------------------------------------
// Ledger checks

export const FINAL_STATUSES = new Set(['applied', 'stale', 'duplicate', 'duplicate_version']);

export interface InboxRow {
  status: string;
  reason: string | null;
  attempts: number;
  last_error: string | null;
}

export async function inboxRows(pool: pg.Pool, tenant: string, ids: readonly string[]): Promise<Map<string, InboxRow>> {
  const { rows } = await pool.query<InboxRow & { event_id: string }>(
    'SELECT event_id, status, reason, attempts, last_error FROM inbox_events WHERE tenant_id = $1 AND event_id = ANY($2)',
    [tenant, ids],
  );
  return new Map(rows.map((r) => [r.event_id, r]));
}

/** Which of the ids have an inbox row with a final status. */
export async function settledIds(pool: pg.Pool, tenant: string, ids: readonly string[]): Promise<Set<string>> {
  const { rows } = await pool.query<{ event_id: string }>(
    'SELECT event_id FROM inbox_events WHERE tenant_id = $1 AND event_id = ANY($2) AND status = ANY($3)',
    [tenant, ids, [...FINAL_STATUSES]],
  );
  return new Set(rows.map((r) => r.event_id));
}

export async function resourceVersions(pool: pg.Pool, tenant: string, type = 'theme'): Promise<Map<string, number>> {
  const { rows } = await pool.query<{ resource_id: string; version: string }>(
    'SELECT resource_id, version FROM resource_state WHERE tenant_id = $1 AND resource_type = $2',
    [tenant, type],
  );
  return new Map(rows.map((r) => [r.resource_id, Number(r.version)]));
}

/** Ids of the accepted events that are not on the events topic (by the `event-id` header). */
export async function missingFromEventsTopic(
  kafka: Kafka,
  topic: string,
  ids: Iterable<string>,
): Promise<{ missing: string[]; records: number }> {
  const records = await readTopic(kafka, topic, 120_000);
  const onTopic = new Set(records.map((r) => r.headers['event-id']));
  return { missing: [...ids].filter((id) => !onTopic.has(id)), records: records.length };
}

export interface DlqEntry {
  eventId: string;
  key: string;
  reason: string | undefined;
  error: string | undefined;
}

export async function dlqEntries(kafka: Kafka, topic: string): Promise<DlqEntry[]> {
  const records = await readTopic(kafka, topic, 120_000);
  return records.map((r) => {
    let eventId = r.headers['event-id'] ?? '';
    try {
      eventId = (JSON.parse(r.value.toString('utf8')) as { event_id?: string }).event_id ?? eventId;
    } catch {
      // not JSON: keep the header
    }
    return { eventId, key: r.key, reason: r.headers['dlq-reason'], error: r.headers['retry-last-error-message'] };
  });
}

export interface AppliedTopicReport {
  problems: string[];
  records: number;
  /** Records identical to one published before on their key (a batch published again). */
  repeated: number;
  /** Repeats that went back in version: a replay of several records of one key (v1 v2 v1 v2). */
  replaysBack: string[];
}

/**
 * @deprecated Use appliedLedger: this sees only the records on the topic, so an applied event that
 * was never published passes. Kept until every test has moved over.
 *
 * The applied topic, per key (read committed with readTopic, never counted by offsets):
 * - a record that is new on its key has a version above every version before it on that key;
 * - a record at or below that version must be byte-identical to one published before on the key
 *   (the relay publishing a batch again, README "The applied record"), and a replay that starts
 *   at an older record must repeat that key's records in order up to the newest one before anything
 *   new follows, so the key never ends below a version it reached (compaction keeps the last one);
 * - for every resource given, the last record's version is the one resource_state holds.
 */
export async function appliedTopicProblems(input: {
  kafka: Kafka;
  topic: string;
  tenant: string;
  type?: string;
  /** resource id -> version in resource_state */
  state: Map<string, number>;
  /** Resources that must have a record whose version equals their stored version. */
  resources: Iterable<string>;
}): Promise<AppliedTopicReport> {
  return analyseApplied(await readTopic(input.kafka, input.topic, 120_000), input);
}

/** @deprecated Use analyseLedger. appliedTopicProblems on records already read. */
export function analyseApplied(
  records: readonly ReadRecord[],
  input: { tenant: string; type?: string; state: Map<string, number>; resources: Iterable<string> },
): AppliedTopicReport {
  const type = input.type ?? 'theme';
  interface Published {
    version: number;
    value: string;
    at: string;
    appliedAt: string;
  }
  const keys = new Map<string, { history: Published[]; replay?: { next: number; from: string } }>();
  const problems: string[] = [];
  const replaysBack: string[] = [];
  let repeated = 0;
  for (const r of records) {
    const value = r.value.toString('utf8');
    const at = `${r.partition}:${r.offset}`;
    let version: number;
    let appliedAt = '';
    try {
      const parsed = JSON.parse(value) as { resource: { version: number }; applied_at?: string };
      version = Number(parsed.resource.version);
      appliedAt = parsed.applied_at ?? '';
    } catch {
      problems.push(`${r.key} at ${at}: not an applied record`);
      continue;
    }
    const key = keys.get(r.key) ?? { history: [] };
    keys.set(r.key, key);
    const { history } = key;
    if (key.replay) {
      const expected = history[key.replay.next]!;
      if (value === expected.value) {
        repeated += 1;
        key.replay.next += 1;
        if (key.replay.next === history.length) key.replay = undefined;
        continue;
      }
      problems.push(
        `${r.key}: the replay from ${key.replay.from} stopped at v${expected.version} (${expected.at}): v${version} at ${at} came instead, ` +
          `below the v${history.at(-1)!.version} it had reached`,
      );
      key.replay = undefined;
    }
    const newest = history.at(-1);
    if (!newest || version > newest.version) {
      history.push({ version, value, at, appliedAt });
      continue;
    }
    const same = history.findIndex((p) => p.value === value);
    if (same < 0) {
      problems.push(
        version === newest.version
          ? `${r.key}: v${version} published twice with different bytes (${newest.at}, ${at})`
          : `${r.key}: v${newest.version} (${newest.at}) then a new record v${version} (${at}): the key went back`,
      );
      continue;
    }
    repeated += 1;
    if (same < history.length - 1) {
      key.replay = { next: same + 1, from: at };
      const original = history[same]!;
      replaysBack.push(
        `${r.key}: v${original.version}..v${newest.version} (first at ${original.at}, applied_at ${original.appliedAt}) again from ${at}`,
      );
    }
  }
  for (const [name, key] of keys) {
    if (key.replay) {
      problems.push(
        `${name}: the replay from ${key.replay.from} ended at v${key.history[key.replay.next - 1]!.version}, below v${key.history.at(-1)!.version}`,
      );
    }
  }
  for (const id of input.resources) {
    const name = `${input.tenant}/${type}/${id}`;
    const stored = input.state.get(id);
    const onTopic = keys.get(name)?.history.at(-1)?.version;
    if (stored === undefined) problems.push(`${name}: no resource_state row`);
    else if (onTopic !== stored)
      problems.push(`${name}: applied topic ends at ${onTopic === undefined ? 'nothing' : `v${onTopic}`}, resource_state holds v${stored}`);
  }
  return { problems, records: records.length, repeated, replaysBack };
}

/** Per resource: the highest accepted version <= the stored one <= the highest version sent. */
export function stateProblems(input: { accepted: Map<string, number>; sent: Map<string, number>; state: Map<string, number> }): string[] {
  const problems: string[] = [];
  for (const [resource, version] of input.accepted) {
    const got = input.state.get(resource);
    const most = input.sent.get(resource) ?? version;
    if (got === undefined || got < version || got > most)
      problems.push(`${resource}: stored v${got}, accepted up to v${version}, sent up to v${most}`);
  }
  return problems;
}

/** First few, and how many more: keeps a failure message readable. */
export function firstOf(problems: string[], n = 10): string[] {
  return problems.length <= n ? problems : [...problems.slice(0, n), `... and ${problems.length - n} more`];
}

// ---------------------------------------------------------------------------------------------
// The applied ledger: every applied event has its record, and nothing else is on the topic

/** An inbox row that ended `applied`: the event the applied topic must carry exactly once. */
export interface AppliedEvent {
  tenant: string;
  eventId: string;
  /** `<tenant>/<type>/<id>`, the record key. */
  key: string;
  version: number;
}

/** A resource_state row: what the last record of its key must say. */
export interface StateRow {
  key: string;
  version: number;
  deleted: boolean;
  lastEventId: string;
}

export interface LedgerFacts {
  /** The applied topic, read committed (readTopic), in partition and offset order. */
  records: readonly ReadRecord[];
  /** Every inbox row in scope that ended `applied`. */
  applied: readonly AppliedEvent[];
  /** Every resource_state row in scope. */
  state: readonly StateRow[];
  /** applied_outbox payloads by `<key> <event id>`; an event with two rows was applied twice. */
  outbox?: ReadonlyMap<string, readonly string[]>;
  /** Only this tenant: a record of another tenant is foreign. */
  tenant?: string;
  /** Accepted (2xx) event id -> its inbox status ('missing' when there is no row). */
  acceptedStatus?: ReadonlyMap<string, string>;
  /** Accepted ids that must end dead_lettered (poison the test sent on purpose). */
  deadLettered?: ReadonlySet<string>;
}

export interface LedgerReport {
  problems: string[];
  records: number;
  applied: number;
  /** Records identical to one published before on their key (a batch published again). */
  repeated: number;
  /** Accepted ids by inbox status. */
  statuses: Record<string, number>;
}

const headerText = (headers: Record<string, string>) =>
  JSON.stringify(
    Object.keys(headers)
      .sort()
      .map((k) => [k, headers[k]]),
  );

/**
 * The ledger on facts already read (appliedLedger reads them). Per key, the applied events in
 * version order (the order they applied: an event applies only above the stored version) must
 * appear on the topic each exactly once, in that order, where a record may be published again
 * byte-identical (value and headers) only as the relay replays a batch: the replay repeats the
 * key's records in order up to the newest one before anything new follows, so the key never ends
 * on an older record (compaction keeps the last one). The last record of every key is the state
 * (version, delete or not, event id). Every record is an applied event of its key, byte-identical
 * to its outbox row. Every accepted (2xx) event id ended settled.
 */
export function analyseLedger(facts: LedgerFacts): LedgerReport {
  const problems: string[] = [];
  const expected = new Map<string, AppliedEvent[]>();
  for (const a of facts.applied) expected.set(a.key, [...(expected.get(a.key) ?? []), a]);
  const keyOfEvent = new Map<string, string>();
  for (const [key, list] of expected) {
    list.sort((a, b) => a.version - b.version);
    for (let i = 1; i < list.length; i += 1) {
      if (list[i]!.version === list[i - 1]!.version)
        problems.push(`${key}: v${list[i]!.version} applied twice (${list[i - 1]!.eventId}, ${list[i]!.eventId})`);
    }
    for (const a of list) keyOfEvent.set(`${a.tenant} ${a.eventId}`, key);
  }
  if (facts.outbox) {
    for (const a of facts.applied) {
      const rows = facts.outbox.get(`${a.key} ${a.eventId}`)?.length ?? 0;
      if (rows > 1) problems.push(`${a.key}: ${a.eventId} (v${a.version}) has ${rows} outbox rows`);
    }
  }

  interface Published {
    index: number;
    value: string;
    headers: string;
    at: string;
  }
  interface KeyWalk {
    /** How many of the key's applied events have been seen (published or reported skipped). */
    next: number;
    history: Published[];
    published: Set<number>;
    replay?: { next: number; from: string };
    last?: { version: number; deleted: boolean; eventId: string; at: string };
  }
  const walks = new Map<string, KeyWalk>();
  let repeated = 0;
  let foreign = 0;
  for (const r of facts.records) {
    const at = `${r.partition}:${r.offset}`;
    const value = r.value.toString('utf8');
    let parsed: { event_id: string; tenant_id: string; resource: { version: number }; action: string };
    try {
      parsed = JSON.parse(value) as typeof parsed;
      if (typeof parsed.event_id !== 'string' || typeof parsed.resource?.version !== 'number') throw new Error('not a record');
    } catch {
      foreign += 1;
      problems.push(`foreign record at ${at} (key ${r.key}): not an applied record`);
      continue;
    }
    const eventId = r.headers['event-id'] ?? parsed.event_id;
    const version = parsed.resource.version;
    const list = expected.get(r.key);
    const index = list?.findIndex((a) => a.eventId === eventId && a.eventId === parsed.event_id) ?? -1;
    if (facts.tenant !== undefined && parsed.tenant_id !== facts.tenant) {
      foreign += 1;
      problems.push(`foreign record at ${at}: ${r.key} v${version} (${eventId}) of tenant ${parsed.tenant_id}, not ${facts.tenant}`);
      continue;
    }
    if (!list || index < 0) {
      foreign += 1;
      const elsewhere = keyOfEvent.get(`${parsed.tenant_id} ${eventId}`);
      problems.push(
        `foreign record at ${at}: ${r.key} v${version} (${eventId}) is no applied event of that key` +
          (elsewhere ? ` (it applied on ${elsewhere})` : ''),
      );
      continue;
    }
    const stored = facts.outbox?.get(`${r.key} ${eventId}`);
    if (stored && stored.length > 0 && !stored.includes(value))
      problems.push(`${r.key} v${version} (${eventId}) at ${at}: the value is not its outbox row's bytes`);
    const headers = headerText(r.headers);
    const walk = walks.get(r.key) ?? { next: 0, history: [], published: new Set<number>() };
    walks.set(r.key, walk);
    walk.last = { version, deleted: parsed.action === 'delete', eventId, at };
    if (walk.replay) {
      const want = walk.history[walk.replay.next]!;
      if (want.index === index && want.value === value && want.headers === headers) {
        repeated += 1;
        walk.replay.next += 1;
        if (walk.replay.next === walk.history.length) walk.replay = undefined;
        continue;
      }
      problems.push(
        `${r.key}: the replay from ${walk.replay.from} stopped before v${list[want.index]!.version} (${want.at}): ` +
          `v${version} at ${at} came instead, below the v${list[walk.history.at(-1)!.index]!.version} the key had reached`,
      );
      walk.replay = undefined;
    }
    if (index >= walk.next) {
      if (index > walk.next) {
        const skipped = list.slice(walk.next, index).map((a) => `v${a.version} (${a.eventId})`);
        problems.push(`${r.key}: ${skipped.join(', ')} applied but skipped: v${version} at ${at} came next`);
      }
      walk.history.push({ index, value, headers, at });
      walk.published.add(index);
      walk.next = index + 1;
      continue;
    }
    // An event already passed: only a byte-identical repeat of a published record may come now.
    const position = walk.history.findIndex((p) => p.index === index);
    if (position < 0) {
      problems.push(`${r.key}: v${version} (${eventId}) at ${at} came after newer records, never before`);
      continue;
    }
    const original = walk.history[position]!;
    if (original.value !== value || original.headers !== headers) {
      problems.push(`${r.key}: v${version} (${eventId}) published again at ${at} with other bytes than at ${original.at}`);
      continue;
    }
    repeated += 1;
    if (position < walk.history.length - 1) walk.replay = { next: position + 1, from: at };
  }
  for (const [key, list] of expected) {
    const walk = walks.get(key);
    const missing = list.slice(walk?.next ?? 0).map((a) => `v${a.version} (${a.eventId})`);
    if (missing.length > 0) problems.push(`${key}: ${missing.join(', ')} applied, never published`);
    if (walk?.replay) {
      problems.push(
        `${key}: the replay from ${walk.replay.from} ended at v${list[walk.history[walk.replay.next - 1]!.index]!.version}, ` +
          `below v${list[walk.history.at(-1)!.index]!.version}`,
      );
    }
  }
  for (const s of facts.state) {
    const last = walks.get(s.key)?.last;
    const want = `v${s.version}${s.deleted ? ' deleted' : ''} (${s.lastEventId})`;
    if (!last) problems.push(`${s.key}: resource_state holds ${want}, the applied topic has no record of it`);
    else if (last.version !== s.version || last.deleted !== s.deleted || last.eventId !== s.lastEventId)
      problems.push(
        `${s.key}: the last record (${last.at}) is v${last.version}${last.deleted ? ' deleted' : ''} (${last.eventId}), resource_state holds ${want}`,
      );
  }
  const stateKeys = new Set(facts.state.map((s) => s.key));
  for (const key of expected.keys()) if (!stateKeys.has(key)) problems.push(`${key}: applied events but no resource_state row`);
  const statuses: Record<string, number> = {};
  for (const [id, status] of facts.acceptedStatus ?? []) {
    statuses[status] = (statuses[status] ?? 0) + 1;
    if (facts.deadLettered?.has(id)) {
      if (status !== 'dead_lettered') problems.push(`accepted ${id} (sent to be dead-lettered) ended ${status}`);
    } else if (!FINAL_STATUSES.has(status)) problems.push(`accepted ${id} ended ${status}, not settled`);
  }
  if (foreign > 0) problems.push(`${foreign} foreign records on the applied topic`);
  return { problems, records: facts.records.length, applied: facts.applied.length, repeated, statuses };
}

export interface AppliedLedgerInput {
  pool: pg.Pool;
  kafka: Kafka;
  appliedTopic: string;
  /** Only this tenant's events and state; a record of another tenant on the topic is foreign. */
  tenant?: string;
  /** Event ids the ingress answered 2xx (of `tenant`, when given). */
  accepted: Iterable<string>;
  /** Accepted ids that must end dead_lettered instead (poison the test sent on purpose). */
  deadLettered?: ReadonlySet<string>;
}

/**
 * Reads the applied topic, the inbox's applied rows, resource_state and applied_outbox, and runs
 * analyseLedger on them. It does not trust the relay's cursor ("outbox drained" counts only rows
 * after it, so a row the cursor skipped would count as published): every applied inbox row must
 * have its record on the topic.
 */
export async function appliedLedger(input: AppliedLedgerInput): Promise<LedgerReport> {
  const { pool, tenant } = input;
  const scope = tenant === undefined ? [] : [tenant];
  const where = tenant === undefined ? '' : 'AND tenant_id = $1';
  const records = await readTopic(input.kafka, input.appliedTopic, 120_000);
  const applied = await pool.query<{ tenant_id: string; event_id: string; key: string; version: string }>(
    `SELECT tenant_id, event_id, tenant_id || '/' || resource_type || '/' || resource_id AS key, resource_version::text AS version
     FROM inbox_events WHERE status = 'applied' ${where}`,
    scope,
  );
  const state = await pool.query<{ key: string; version: string; deleted: boolean; last_event_id: string }>(
    `SELECT tenant_id || '/' || resource_type || '/' || resource_id AS key, version::text AS version, deleted, last_event_id
     FROM resource_state WHERE true ${where}`,
    scope,
  );
  const outboxRows = await pool.query<{ key: string; event_id: string; payload: string }>(
    `SELECT key, event_id, payload FROM applied_outbox ${tenant === undefined ? '' : "WHERE starts_with(key, $1 || '/')"}`,
    scope,
  );
  const outbox = new Map<string, string[]>();
  for (const o of outboxRows.rows) outbox.set(`${o.key} ${o.event_id}`, [...(outbox.get(`${o.key} ${o.event_id}`) ?? []), o.payload]);
  const ids = [...new Set(input.accepted)];
  const inbox = await pool.query<{ event_id: string; status: string }>(
    `SELECT event_id, status FROM inbox_events WHERE event_id = ANY($${scope.length + 1}) ${where}`,
    [...scope, ids],
  );
  const found = new Map(inbox.rows.map((r) => [r.event_id, r.status]));
  return analyseLedger({
    records,
    applied: applied.rows.map((r) => ({ tenant: r.tenant_id, eventId: r.event_id, key: r.key, version: Number(r.version) })),
    state: state.rows.map((r) => ({ key: r.key, version: Number(r.version), deleted: r.deleted, lastEventId: r.last_event_id })),
    outbox,
    ...(tenant === undefined ? {} : { tenant }),
    acceptedStatus: new Map(ids.map((id) => [id, found.get(id) ?? 'missing'])),
    ...(input.deadLettered ? { deadLettered: input.deadLettered } : {}),
  });
}

/** appliedLedger's problems alone (empty: the ledger holds). */
export async function appliedLedgerProblems(input: AppliedLedgerInput): Promise<string[]> {
  return (await appliedLedger(input)).problems;
}
