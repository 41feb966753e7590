import { SnapshotApplier, type ApplyResult, type SnapshotApplierOptions, type SourceRecord } from '#domain/apply/index.ts';
import type { FaultInjector } from '#domain/failures/index.ts';

function keyOf(record: SourceRecord): string | undefined {
  if (record.key === null) return undefined;
  return typeof record.key === 'string' ? record.key : record.key.toString('utf8');
}

/**
 * The real applier with explicitly configured faults in front (FAULT_INJECT). A fault counts one
 * attempt per single-record apply, which is what the main consumer falls back to after a failed
 * chunk and what each retry consumer does; a chunk holding a faulty resource fails without
 * counting, exactly as a chunk with a real failing record would.
 */
export class FaultInjectingApplier extends SnapshotApplier {
  readonly #faults: FaultInjector;

  constructor(options: SnapshotApplierOptions, faults: FaultInjector) {
    super(options);
    this.#faults = faults;
  }

  override async apply(record: SourceRecord): Promise<ApplyResult> {
    const key = keyOf(record);
    if (key !== undefined) this.#faults.check(key);
    const [result] = await super.applyBatch([record]);
    return result!;
  }

  override async applyBatch(records: readonly SourceRecord[]): Promise<ApplyResult[]> {
    for (const record of records) {
      const key = keyOf(record);
      if (key !== undefined && this.#faults.wouldFail(key)) {
        throw new Error(`chunk holds ${key}, which has injected faults pending`);
      }
    }
    return super.applyBatch(records);
  }
}
