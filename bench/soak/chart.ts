// The soak's samples as one hand-written SVG (no native dependencies): small panels over a shared
// time axis, the warm-up shaded and the end of the load marked.

export interface Series {
  label: string;
  color: string;
  /** One value per sample; NaN leaves a gap. */
  values: number[];
  dashed?: boolean;
}

export interface Panel {
  title: string;
  unit: string;
  series: Series[];
}

export interface ChartOptions {
  title: string;
  /** Sample times, seconds since the load started. */
  times: number[];
  warmupEndS: number;
  loadEndS: number;
  panels: Panel[];
  /** Panels per row. */
  columns?: number;
}

const PANEL_W = 470;
const PANEL_H = 220;
const MARGIN = { left: 56, right: 14, top: 44, bottom: 34 };
const TITLE_H = 34;

const escape = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
const num = (n: number) => (Math.round(n * 10) / 10).toString();

/** 1, 2 or 5 times a power of ten, at least `raw`. */
function niceStep(raw: number): number {
  if (!(raw > 0)) return 1;
  const power = 10 ** Math.floor(Math.log10(raw));
  for (const m of [1, 2, 5, 10]) if (m * power >= raw) return m * power;
  return 10 * power;
}

/** From 0 to the first step at or above `max`. */
function ticks(max: number, count: number): number[] {
  const step = niceStep(max / count);
  const top = Math.max(1, Math.ceil(max / step - 1e-9));
  return Array.from({ length: top + 1 }, (_, i) => Number((i * step).toPrecision(12)));
}

function label(v: number): string {
  if (v >= 10_000) return `${num(v / 1000)}k`;
  return Number.isInteger(v) ? String(v) : v.toFixed(v < 1 ? 2 : 1);
}

function panelSvg(panel: Panel, options: ChartOptions, x0: number, y0: number): string {
  const w = PANEL_W - MARGIN.left - MARGIN.right;
  const h = PANEL_H - MARGIN.top - MARGIN.bottom;
  const left = x0 + MARGIN.left;
  const top = y0 + MARGIN.top;
  const tMax = Math.max(options.times.at(-1) ?? 1, options.loadEndS, 1);
  const inMinutes = tMax > 300;
  const xTicks = ticks(inMinutes ? tMax / 60 : tMax, 6).map((v) => (inMinutes ? v * 60 : v));
  const xEnd = Math.max(tMax, xTicks.at(-1) ?? tMax);
  const finite = panel.series.flatMap((s) => s.values.filter((v) => Number.isFinite(v)));
  const dataMax = finite.length ? Math.max(...finite) : 1;
  const yTicks = ticks(dataMax > 0 ? dataMax : 1, 4);
  const yEnd = yTicks.at(-1)!;
  const x = (t: number) => left + (t / xEnd) * w;
  const y = (v: number) => top + h - (v / yEnd) * h;
  const parts: string[] = [];
  parts.push(
    `<text x="${left}" y="${y0 + 18}" class="title">${escape(panel.title)} <tspan class="unit">(${escape(panel.unit)})</tspan></text>`,
  );
  // Warm-up shaded, end of load dashed.
  parts.push(`<rect x="${num(left)}" y="${top}" width="${num(x(options.warmupEndS) - left)}" height="${h}" class="warmup"/>`);
  parts.push(`<line x1="${num(x(options.loadEndS))}" y1="${top}" x2="${num(x(options.loadEndS))}" y2="${top + h}" class="loadend"/>`);
  for (const v of yTicks) {
    parts.push(`<line x1="${left}" y1="${num(y(v))}" x2="${left + w}" y2="${num(y(v))}" class="grid"/>`);
    parts.push(`<text x="${left - 6}" y="${num(y(v) + 4)}" class="ytick">${label(v)}</text>`);
  }
  for (const t of xTicks) {
    parts.push(`<line x1="${num(x(t))}" y1="${top + h}" x2="${num(x(t))}" y2="${top + h + 4}" class="axis"/>`);
    parts.push(`<text x="${num(x(t))}" y="${top + h + 16}" class="xtick">${label(inMinutes ? t / 60 : t)}</text>`);
  }
  parts.push(`<text x="${left + w}" y="${top + h + 30}" class="xlabel">${inMinutes ? 'minutes' : 'seconds'} since the load started</text>`);
  parts.push(`<rect x="${left}" y="${top}" width="${w}" height="${h}" class="frame"/>`);
  for (const s of panel.series) {
    // A gap (NaN) splits the line; a lone point between gaps is drawn as a dot.
    let run: string[] = [];
    const flush = () => {
      if (run.length > 1) parts.push(`<polyline points="${run.join(' ')}" stroke="${s.color}" class="line${s.dashed ? ' dashed' : ''}"/>`);
      else if (run.length === 1) {
        const [cx, cy] = run[0]!.split(',');
        parts.push(`<circle cx="${cx}" cy="${cy}" r="2" fill="${s.color}"/>`);
      }
      run = [];
    };
    s.values.forEach((v, i) => {
      const t = options.times[i];
      if (t === undefined || !Number.isFinite(v)) return flush();
      run.push(`${num(x(t))},${num(y(v))}`);
    });
    flush();
  }
  // Legend in a row between the title and the frame, so it never hides a line.
  let lx = left;
  for (const s of panel.series) {
    const ly = y0 + 34;
    parts.push(
      `<line x1="${lx}" y1="${ly - 4}" x2="${lx + 16}" y2="${ly - 4}" stroke="${s.color}" class="line${s.dashed ? ' dashed' : ''}"/>`,
    );
    parts.push(`<text x="${lx + 21}" y="${ly}" class="legend">${escape(s.label)}</text>`);
    lx += 21 + s.label.length * 5.6 + 16;
  }
  return parts.join('\n');
}

export function renderChart(options: ChartOptions): string {
  const columns = options.columns ?? 2;
  const rows = Math.ceil(options.panels.length / columns);
  const width = columns * PANEL_W;
  const height = TITLE_H + rows * PANEL_H + 18;
  const panels = options.panels.map((p, i) => panelSvg(p, options, (i % columns) * PANEL_W, TITLE_H + Math.floor(i / columns) * PANEL_H));
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="Helvetica, Arial, sans-serif">
<style>
.title { font-size: 13px; font-weight: bold; fill: #222; }
.unit { font-weight: normal; fill: #555; }
.ytick { font-size: 10px; fill: #444; text-anchor: end; }
.xtick { font-size: 10px; fill: #444; text-anchor: middle; }
.xlabel { font-size: 10px; fill: #666; text-anchor: end; }
.legend { font-size: 10px; fill: #333; }
.grid { stroke: #e4e4e4; stroke-width: 1; }
.axis { stroke: #888; stroke-width: 1; }
.frame { fill: none; stroke: #999; stroke-width: 1; }
.warmup { fill: #f1f1f1; }
.loadend { stroke: #777; stroke-width: 1; stroke-dasharray: 4 3; }
.line { fill: none; stroke-width: 1.6; stroke-linejoin: round; }
.dashed { stroke-dasharray: 5 3; stroke-width: 1.2; }
.note { font-size: 10px; fill: #666; }
</style>
<rect width="${width}" height="${height}" fill="#fff"/>
<text x="14" y="22" class="title">${escape(options.title)}</text>
${panels.join('\n')}
<text x="14" y="${height - 6}" class="note">Grey band: warm-up (not in the RSS baseline). Dashed line: the load stops. One point per sample.</text>
</svg>
`;
}
