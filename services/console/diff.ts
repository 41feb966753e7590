// A diff between two applied snapshots: every leaf path whose value was added, removed or changed.

export interface DiffLine {
  path: string;
  kind: 'added' | 'removed' | 'changed';
  before?: string;
  after?: string;
}

function flatten(value: unknown, prefix: string, out: Map<string, string>): void {
  if (value !== null && typeof value === 'object' && Object.keys(value).length > 0) {
    for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
      flatten(v, Array.isArray(value) ? `${prefix}[${k}]` : prefix ? `${prefix}.${k}` : k, out);
    }
    return;
  }
  out.set(prefix || '(root)', JSON.stringify(value));
}

export function diffSnapshots(before: unknown, after: unknown): DiffLine[] {
  const a = new Map<string, string>();
  const b = new Map<string, string>();
  flatten(before, '', a);
  flatten(after, '', b);
  const paths = [...new Set([...a.keys(), ...b.keys()])].sort();
  const lines: DiffLine[] = [];
  for (const path of paths) {
    const x = a.get(path);
    const y = b.get(path);
    if (x === y) continue;
    if (x === undefined) lines.push({ path, kind: 'added', after: y! });
    else if (y === undefined) lines.push({ path, kind: 'removed', before: x });
    else lines.push({ path, kind: 'changed', before: x, after: y });
  }
  return lines;
}
