// Cheap parameter encodings for the set-based apply statements.
//
// pg's own array serialisation runs two regular expressions over every element, and JSON
// parameters make Postgres parse every row twice (JSON, then the column's input function). So:
// short columns go as array literals built here (escaping only when an element needs it), and
// the big ones (raw event bodies, snapshots, applied records) travel as one binary bytea per
// column with an offset and a length per row. pg sends a Buffer parameter in binary format, so
// those bytes are neither escaped nor parsed on the way; each row takes its slice in SQL:
// `convert_from(substring($n::bytea FROM off FOR len), 'UTF8')` (which also checks the UTF-8).

const NEEDS_QUOTING_CARE = /["\\]/;

function quoteElement(value: string): string {
  if (!NEEDS_QUOTING_CARE.test(value)) return `"${value}"`;
  return `"${value.replaceAll('\\', '\\\\').replaceAll('"', '\\"')}"`;
}

/** A Postgres text[] literal; null elements are SQL NULLs. */
export function textArray(values: readonly (string | null | undefined)[]): string {
  let out = '{';
  for (let i = 0; i < values.length; i += 1) {
    const v = values[i];
    if (i > 0) out += ',';
    out += v === null || v === undefined ? 'NULL' : quoteElement(v);
  }
  return `${out}}`;
}

/** A Postgres integer/bigint[] literal from safe integers or decimal strings (Kafka offsets). */
export function integerArray(values: readonly (number | string)[]): string {
  return `{${values.join(',')}}`;
}

export function booleanArray(values: readonly boolean[]): string {
  return `{${values.map((v) => (v ? 't' : 'f')).join(',')}}`;
}

/** Many byte strings packed into one bytea parameter, each addressed by offset (1-based) and length. */
export class PackedBytes {
  readonly #parts: Buffer[] = [];
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
    const bytes = typeof value === 'string' ? Buffer.from(value, 'utf8') : value;
    this.#parts.push(bytes);
    this.#offsets.push(this.#size + 1);
    this.#lengths.push(bytes.length);
    this.#size += bytes.length;
  }

  /** [bytes, offsets literal, lengths literal], in that parameter order. */
  params(): [Buffer, string, string] {
    return [Buffer.concat(this.#parts, this.#size), integerArray(this.#offsets), integerArray(this.#lengths)];
  }
}
