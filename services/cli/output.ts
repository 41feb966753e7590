export interface CliIo {
  stdout: (text: string) => void;
  stderr: (text: string) => void;
}

export type Cell = string | number | bigint | boolean | null | undefined;

function cellText(value: Cell): string {
  if (value === null || value === undefined) return '-';
  return String(value);
}

/** A plain aligned table: operators read it, scripts use --json instead. */
export function renderTable(columns: string[], rows: Cell[][]): string {
  const text = rows.map((r) => r.map(cellText));
  const widths = columns.map((c, i) => Math.max(c.length, ...text.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => c.padEnd(widths[i] ?? 0))
      .join('  ')
      .trimEnd();
  return [line(columns.map((c) => c.toUpperCase())), ...text.map(line)].join('\n');
}

export function toJson(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) => (typeof v === 'bigint' ? v.toString() : v), 2);
}

/**
 * Each command produces one result: `text` for people, `data` for --json. Keeping both in one
 * place means the JSON shape is never an afterthought of the text output.
 */
export class Output {
  readonly json: boolean;
  private readonly io: CliIo;
  constructor(io: CliIo, json: boolean) {
    this.io = io;
    this.json = json;
  }

  result(data: unknown, text: string): void {
    if (this.json) this.io.stdout(`${toJson(data)}\n`);
    else if (text.length > 0) this.io.stdout(text.endsWith('\n') ? text : `${text}\n`);
  }

  /**
   * Part of the text result printed before the command goes on (a diff shown before it is applied);
   * nothing under --json, whose one document comes from result().
   */
  text(text: string): void {
    if (!this.json && text.length > 0) this.io.stdout(text.endsWith('\n') ? text : `${text}\n`);
  }

  /** Progress and notes for people; never on stdout, so --json output stays parseable. */
  note(text: string): void {
    if (!this.json) this.io.stderr(`${text}\n`);
  }

  error(message: string, extra: Record<string, unknown> = {}): void {
    if (this.json) this.io.stderr(`${toJson({ error: message, ...extra })}\n`);
    else this.io.stderr(`error: ${message}\n`);
  }
}
