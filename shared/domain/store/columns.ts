// Column specs for the wide statements: a statement's columns are declared once, `name -> encoder`,
// and the same declaration writes the SQL (the unnest casts, the INSERT column list, a recordset's
// column definitions, a VALUES placeholder list) and encodes the parameters from typed row
// objects, so no parameter is lined up with its placeholder by hand.
//
// The encodings are cheap on purpose. pg's own array serialisation runs two regular expressions
// over every element, and JSON parameters make Postgres parse every row twice (JSON, then the
// column's input function). So: short columns go as array literals built here (escaping only when
// an element needs it), and the big ones (raw event bodies, snapshots, applied records) travel as
// one binary bytea per column with an offset and a length per row. pg sends a Buffer parameter in
// binary format, so those bytes are neither escaped nor parsed on the way; each row takes its
// slice in SQL: `convert_from(substring($n::bytea FROM off FOR len), 'UTF8')` (which also checks
// the UTF-8).

const NEEDS_QUOTING_CARE = /["\\]/;

function quoteElement(value: string): string {
  if (!NEEDS_QUOTING_CARE.test(value)) return `"${value}"`;
  return `"${value.replaceAll('\\', '\\\\').replaceAll('"', '\\"')}"`;
}

/**
 * A Postgres text[] literal; null elements are SQL NULLs. A chunk's columns are mostly plain ids or
 * all NULL: those take one join (or one repeat) instead of a quoted string and two concatenations
 * per element, which were a tenth of the worker's allocations.
 */
export function textArray(values: readonly (string | null | undefined)[]): string {
  if (values.length === 0) return '{}';
  const first = values[0];
  if (first === null || first === undefined) {
    if (values.every((v) => v === null || v === undefined)) return `{${'NULL,'.repeat(values.length - 1)}NULL}`;
  } else if (values.every((v) => v !== null && v !== undefined && !NEEDS_QUOTING_CARE.test(v))) {
    return `{"${values.join('","')}"}`;
  }
  let out = '{';
  for (let i = 0; i < values.length; i += 1) {
    const v = values[i];
    if (i > 0) out += ',';
    out += v === null || v === undefined ? 'NULL' : quoteElement(v);
  }
  return `${out}}`;
}

/** A Postgres integer/bigint[] literal from safe integers or decimal strings (Kafka offsets); null elements are SQL NULLs. */
export function integerArray(values: readonly (number | string | null | undefined)[]): string {
  if (!values.some((v) => v === null || v === undefined)) return `{${values.join(',')}}`;
  let out = '{';
  for (let i = 0; i < values.length; i += 1) {
    const v = values[i];
    if (i > 0) out += ',';
    out += v === null || v === undefined ? 'NULL' : String(v);
  }
  return `${out}}`;
}

export function booleanArray(values: readonly boolean[]): string {
  return `{${values.map((v) => (v ? 't' : 'f')).join(',')}}`;
}

/**
 * Many byte strings packed into one bytea parameter, each addressed by offset (1-based) and length.
 * Strings are measured when added and encoded straight into the one buffer by params(), so no
 * intermediate Buffer is made per value.
 */
export class PackedBytes {
  readonly #parts: Array<Buffer | string> = [];
  readonly #offsets: number[] = [];
  readonly #lengths: number[] = [];
  #size = 0;

  /** Adds one value (a string is encoded as UTF-8); null gets length -1, for SQL to turn into NULL. */
  add(value: Buffer | string | null): void {
    if (value === null) {
      this.#offsets.push(1);
      this.#lengths.push(-1);
      return;
    }
    const length = typeof value === 'string' ? Buffer.byteLength(value, 'utf8') : value.length;
    this.#parts.push(value);
    this.#offsets.push(this.#size + 1);
    this.#lengths.push(length);
    this.#size += length;
  }

  /** [bytes, offsets literal, lengths literal], in that parameter order. */
  params(): [Buffer, string, string] {
    const bytes = Buffer.allocUnsafe(this.#size);
    let at = 0;
    for (const part of this.#parts) {
      if (typeof part === 'string') at += bytes.write(part, at, 'utf8');
      else {
        bytes.set(part, at);
        at += part.length;
      }
    }
    return [bytes, integerArray(this.#offsets), integerArray(this.#lengths)];
  }
}

// --- encoders -------------------------------------------------------------------------------------

/** A column whose values travel as one array literal (unnest), one JSON field (recordset) or one parameter (values). */
export interface ScalarEncoder<T> {
  readonly kind: 'scalar';
  /** The Postgres type: the array cast, and a recordset's column type. */
  readonly type: string;
  readonly array: (values: readonly T[]) => string;
}

/** A column packed into one bytea parameter (+ offsets and lengths), sliced per row in SQL; unnest only. */
export interface PackedEncoder<T> {
  readonly kind: 'packed';
  /** What the slice becomes: text as is, or cast to jsonb. */
  readonly type: 'text' | 'jsonb';
  /** Null values (length -1) become SQL NULLs; without it the slice is taken as is (a null would fail). */
  readonly nullable: boolean;
  /** Never set: carries the value type. */
  readonly value?: T;
}

export type Encoder<T> = ScalarEncoder<T> | PackedEncoder<T>;

const scalar = <T>(type: string, array: (values: readonly T[]) => string): ScalarEncoder<T> => ({ kind: 'scalar', type, array });

export const text = scalar<string | null | undefined>('text', textArray);
/** ISO 8601 text. */
export const timestamptz = scalar<string | null | undefined>('timestamptz', textArray);
export const int4 = scalar<number | null | undefined>('int', integerArray);
/** Safe integers or decimal strings (Kafka offsets). */
export const int8 = scalar<number | string | null | undefined>('bigint', integerArray);
export const bool = scalar<boolean>('boolean', booleanArray);
/** A big text value (an event body, an applied record), packed; never null. */
export const packedText: PackedEncoder<Buffer | string> = { kind: 'packed', type: 'text', nullable: false };
/** A JSON document as text, packed; null is SQL NULL. */
export const packedJsonbOrNull: PackedEncoder<Buffer | string | null> = { kind: 'packed', type: 'jsonb', nullable: true };

/** Any encoder (scalar encoders take values, packed ones carry their value type). */
export type ColumnSpec = Record<string, ScalarEncoder<never> | PackedEncoder<unknown>>;
type ValueOf<E> = E extends ScalarEncoder<infer T> ? T : E extends PackedEncoder<infer T> ? T : never;
/** The typed row a spec encodes. */
export type RowOf<S> = { [K in keyof S]: ValueOf<S[K]> };

/** Declares a spec (the identity: it keeps each column's encoder type for RowOf). */
export function columns<S extends ColumnSpec>(spec: S): S {
  return spec;
}

// --- placing a spec in a statement ----------------------------------------------------------------

/** One spec placed in a statement, its parameters numbered from where the statement's previous source ended. */
export interface Placed<Row> {
  /** FROM item: `unnest($1::text[], ...) AS r(a, ...)` or `json_to_recordset($n::json) AS r(a text, ...)`. */
  readonly from: string;
  /** The column names in spec order (an INSERT's column list). */
  readonly names: string;
  /** One expression per column, same order (a SELECT list): packed columns are sliced from their bytea. */
  readonly select: string;
  /** `$1, $2, ...`, one per column (a single row's VALUES; no casts: the target columns type them). */
  readonly placeholders: string;
  readonly width: number;
  encode(rows: readonly Row[]): unknown[];
}

export type Source<Row> = (first: number) => Placed<Row>;

function entries(spec: ColumnSpec): Array<[string, ScalarEncoder<never> | PackedEncoder<unknown>]> {
  return Object.entries(spec);
}

/**
 * Rows as parallel arrays, one parameter per column (three for a packed one: bytes, offsets,
 * lengths), read back with `unnest(...) AS alias(columns)`; `ordinality` adds a row number column.
 */
export function unnestOf<S extends ColumnSpec>(spec: S, alias: string, options: { ordinality?: string } = {}): Source<RowOf<S>> {
  return (first) => {
    let n = first;
    const args: string[] = [];
    const names: string[] = [];
    const select: string[] = [];
    const encoders: Array<(rows: readonly Record<string, unknown>[], out: unknown[]) => void> = [];
    for (const [name, encoder] of entries(spec)) {
      if (encoder.kind === 'scalar') {
        args.push(`$${n}::${encoder.type}[]`);
        names.push(name);
        select.push(`${alias}.${name}`);
        const array = encoder.array as (values: readonly unknown[]) => string;
        encoders.push((rows, out) => out.push(array(rows.map((r) => r[name]))));
        n += 1;
      } else {
        const [bytes, off, len] = [n, n + 1, n + 2];
        args.push(`$${off}::int[]`, `$${len}::int[]`);
        names.push(`${name}_off`, `${name}_len`);
        let slice = `convert_from(substring($${bytes}::bytea FROM ${alias}.${name}_off FOR ${alias}.${name}_len), 'UTF8')`;
        if (encoder.type === 'jsonb') slice = `${slice}::jsonb`;
        if (encoder.nullable) slice = `CASE WHEN ${alias}.${name}_len < 0 THEN NULL ELSE ${slice} END`;
        select.push(slice);
        encoders.push((rows, out) => {
          const packed = new PackedBytes();
          for (const r of rows) packed.add(r[name] as Buffer | string | null);
          out.push(...packed.params());
        });
        n += 3;
      }
    }
    const columnNames = entries(spec).map(([name]) => name);
    const aliases = options.ordinality === undefined ? names : [...names, options.ordinality];
    return {
      from: `unnest(${args.join(', ')})${options.ordinality === undefined ? '' : ' WITH ORDINALITY'} AS ${alias}(${aliases.join(', ')})`,
      names: columnNames.join(', '),
      select: select.join(', '),
      placeholders: unsupported('unnestOf', 'placeholders'),
      width: n - first,
      encode(rows) {
        const out: unknown[] = [];
        for (const e of encoders) e(rows as readonly Record<string, unknown>[], out);
        return out;
      },
    };
  };
}

/** Rows as one JSON parameter, read back with `json_to_recordset($n::json) AS alias(column type, ...)`. For rare rows. */
export function recordsetOf<S extends ColumnSpec>(spec: S, alias: string): Source<RowOf<S>> {
  const scalars = entries(spec).map(([name, encoder]) => {
    if (encoder.kind !== 'scalar') throw new Error(`recordsetOf: column ${name} is packed`);
    return [name, encoder] as const;
  });
  return (first) => ({
    from: `json_to_recordset($${first}::json) AS ${alias}(${scalars.map(([name, e]) => `${name} ${e.type}`).join(', ')})`,
    names: scalars.map(([name]) => name).join(', '),
    select: scalars.map(([name]) => `${alias}.${name}`).join(', '),
    placeholders: unsupported('recordsetOf', 'placeholders'),
    width: 1,
    encode: (rows) => [JSON.stringify(rows)],
  });
}

/** One row as plain parameters (`VALUES (${placeholders})`), in spec order; pg serialises each value. */
export function valuesOf<S extends ColumnSpec>(spec: S): Source<RowOf<S>> {
  const names = entries(spec).map(([name]) => name);
  return (first) => ({
    from: unsupported('valuesOf', 'from'),
    names: names.join(', '),
    select: unsupported('valuesOf', 'select'),
    placeholders: names.map((_, i) => `$${first + i}`).join(', '),
    width: names.length,
    encode(rows) {
      if (rows.length !== 1) throw new Error(`valuesOf: one row, not ${rows.length}`);
      const row = rows[0] as Record<string, unknown>;
      return names.map((name) => row[name]);
    },
  });
}

function unsupported(what: string, field: string): string {
  // A marker that fails loudly if it ever reaches Postgres.
  return `<${what} has no ${field}>`;
}

type RowOfSource<T> = T extends Source<infer Row> ? Row : never;
export type RowsOf<M> = { [K in keyof M]: readonly RowOfSource<M[K]>[] };

export interface Statement<M> {
  readonly text: string;
  /** The parameters, in placeholder order, from the rows of each source. */
  values(rows: RowsOf<M>): unknown[];
}

/**
 * A statement over several sources. Their parameters are numbered in the order the sources are
 * listed ($1 up), and `values` lays the rows out in that same order.
 */
export function statement<M extends Record<string, Source<never>>>(
  sources: M,
  write: (placed: { [K in keyof M]: Placed<RowOfSource<M[K]>> }) => string,
): Statement<M> {
  const placed: Record<string, Placed<unknown>> = {};
  let next = 1;
  for (const [key, source] of Object.entries(sources)) {
    const p = source(next) as Placed<unknown>;
    placed[key] = p;
    next += p.width;
  }
  const order = Object.keys(sources);
  const text = write(placed as { [K in keyof M]: Placed<RowOfSource<M[K]>> });
  if (/<\w+Of has no \w+>/.test(text)) throw new Error(`statement uses a field its source does not have: ${text}`);
  return {
    text,
    values(rows) {
      const out: unknown[] = [];
      for (const key of order) out.push(...placed[key]!.encode((rows as Record<string, readonly unknown[]>)[key]!));
      return out;
    },
  };
}
