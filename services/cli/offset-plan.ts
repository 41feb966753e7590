import { parseIsoTime, TIME_HELP, UsageError } from './args.ts';

export type ResetTarget =
  { kind: 'earliest' } | { kind: 'latest' } | { kind: 'time'; timestamp: number } | { kind: 'offset'; offset: bigint };

export function parseResetTarget(value: string): ResetTarget {
  if (value === 'earliest' || value === 'latest') return { kind: value };
  if (/^\d+$/.test(value)) return { kind: 'offset', offset: BigInt(value) };
  const timestamp = parseIsoTime(value, 'to');
  if (timestamp !== undefined) return { kind: 'time', timestamp };
  throw new UsageError(`--to must be earliest, latest, an offset or ${TIME_HELP}, got "${value}"`);
}

export function describeTarget(target: ResetTarget): string {
  switch (target.kind) {
    case 'earliest':
    case 'latest':
      return target.kind;
    case 'time':
      return new Date(target.timestamp).toISOString();
    case 'offset':
      return `offset ${target.offset}`;
  }
}

export interface PartitionWatermarks {
  partition: number;
  low: string;
  high: string;
}

export interface ResetPlanRow {
  partition: number;
  /** Committed offset of the group, null when it has none for this partition. */
  current: string | null;
  target: string;
  low: string;
  high: string;
  /** An explicit offset outside [low, high] was moved to the nearest end, as kafka-consumer-groups does. */
  clamped: boolean;
}

export interface PlanInput {
  target: ResetTarget;
  watermarks: PartitionWatermarks[];
  committed: ReadonlyMap<number, string | null>;
  /** fetchTopicOffsetsByTimestamp result, required for a time target (high when nothing is newer). */
  byTimestamp?: ReadonlyMap<number, string>;
}

/** Pure: the new offset of every partition. Only real offsets, never -1/-2 placeholders. */
export function planReset(input: PlanInput): ResetPlanRow[] {
  return [...input.watermarks]
    .sort((a, b) => a.partition - b.partition)
    .map((w) => {
      const low = BigInt(w.low);
      const high = BigInt(w.high);
      let target: bigint;
      let clamped = false;
      switch (input.target.kind) {
        case 'earliest':
          target = low;
          break;
        case 'latest':
          target = high;
          break;
        case 'time': {
          const found = input.byTimestamp?.get(w.partition);
          if (found === undefined) throw new Error(`no offset for timestamp on partition ${w.partition}`);
          target = BigInt(found) < 0n ? high : BigInt(found);
          break;
        }
        case 'offset':
          target = input.target.offset;
          if (target < low) [target, clamped] = [low, true];
          else if (target > high) [target, clamped] = [high, true];
          break;
      }
      const committed = input.committed.get(w.partition);
      return {
        partition: w.partition,
        current: committed === undefined || committed === null || BigInt(committed) < 0n ? null : committed,
        target: target.toString(),
        low: w.low,
        high: w.high,
        clamped,
      };
    });
}

/** Groups whose offsets may be changed: nobody is consuming (same rule as kafka-consumer-groups). */
export function groupIsInactive(state: string): boolean {
  return state === 'Empty' || state === 'Dead';
}
