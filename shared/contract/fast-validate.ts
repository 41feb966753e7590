// A fast acceptance check for the common case: a well-formed v1 theme event. It accepts only what
// the zod schemas accept (a property test holds it to that), and anything it is unsure of goes to
// zod, which then produces the same result and error messages as always. zod is ~half the cost
// of parseEvent, which runs on every webhook (ingress) and every consumed record (worker).
import { EVENT_TYPE_PATTERN, KEY_SEGMENT_PATTERN, occurredAtSchema, RESOURCE_TYPE_PATTERN } from './envelope.ts';
import { assetUrlSchema, isValidTimeZone } from './theme-snapshot.ts';

const ENVELOPE_KEYS: ReadonlySet<string> = new Set([
  'event_id', 'event_type', 'event_version', 'occurred_at', 'delivery_attempt', 'tenant_id', 'idempotency_key', 'resource', 'data',
]);
const PALETTE_REQUIRED = ['primary', 'background', 'text'] as const;
const PALETTE_KEYS: ReadonlySet<string> = new Set(['primary', 'background', 'text', 'secondary', 'surface', 'accent']);
const SNAPSHOT_KEYS: ReadonlySet<string> = new Set(['slug', 'name', 'status', 'palette', 'layout', 'assets']);
const STATUSES: ReadonlySet<unknown> = new Set(['draft', 'published', 'archived']);
const CLOCK_STYLES: ReadonlySet<unknown> = new Set(['analog', 'digital', 'minimal']);
const ASSET_TYPES: ReadonlySet<unknown> = new Set(['image', 'font', 'icon', 'sound']);
const COLOUR = /^#[0-9A-Fa-f]{6}$/;
const SLUG = /^[a-z0-9]+(?:-[a-z0-9]+)*$/;
const SHA256 = /^[0-9a-f]{64}$/;

type Obj = Record<string, unknown>;

function isPlainObject(value: unknown): value is Obj {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Every own key is in `allowed`; returns the number of keys (-1 when one is not allowed). */
function countAllowedKeys(value: Obj, allowed: ReadonlySet<string>): number {
  const keys = Object.keys(value);
  for (const key of keys) if (!allowed.has(key)) return -1;
  return keys.length;
}

function boundedString(value: unknown, min: number, max: number): value is string {
  return typeof value === 'string' && value.length >= min && value.length <= max;
}

function isInt(value: unknown, min: number): boolean {
  return Number.isSafeInteger(value) && (value as number) >= min;
}

/**
 * True only when `value` (a JSON.parse result whose event_version is 1) is a valid v1 envelope
 * whose data is a valid theme snapshot (or absent / {} for a deletion). False means "ask zod".
 */
export function isCertainlyValidThemeEvent(value: Obj): boolean {
  if (countAllowedKeys(value, ENVELOPE_KEYS) < 0) return false;
  const { event_id, event_type, event_version, occurred_at, delivery_attempt, tenant_id, idempotency_key, resource, data } = value;
  if (event_version !== 1) return false;
  if (!boundedString(event_id, 1, 200)) return false;
  if (typeof event_type !== 'string' || !EVENT_TYPE_PATTERN.test(event_type)) return false;
  if (typeof tenant_id !== 'string' || !KEY_SEGMENT_PATTERN.test(tenant_id)) return false;
  if (delivery_attempt !== undefined && !isInt(delivery_attempt, 1)) return false;
  if (idempotency_key !== undefined && !boundedString(idempotency_key, 1, 200)) return false;
  if (!isPlainObject(resource) || Object.keys(resource).length !== 3) return false;
  const { type, id, version } = resource;
  if (type !== 'theme' || typeof id !== 'string' || !KEY_SEGMENT_PATTERN.test(id) || !isInt(version, 0)) return false;
  if (!RESOURCE_TYPE_PATTERN.test(type)) return false;
  const dot = event_type.indexOf('.');
  if (event_type.slice(0, dot) !== type) return false;
  if (typeof occurred_at !== 'string' || !occurredAtSchema.safeParse(occurred_at).success) return false;
  if (event_type.slice(dot + 1) === 'deleted') return data === undefined || (isPlainObject(data) && Object.keys(data).length === 0);
  return isPlainObject(data) && isCertainlyValidThemeSnapshot(data);
}

function isCertainlyValidThemeSnapshot(data: Obj): boolean {
  if (countAllowedKeys(data, SNAPSHOT_KEYS) !== SNAPSHOT_KEYS.size) return false;
  const { slug, name, status, palette, layout, assets } = data;
  if (!boundedString(slug, 0, 100) || !SLUG.test(slug)) return false;
  if (!boundedString(name, 1, 200) || !STATUSES.has(status)) return false;
  if (!isPlainObject(palette) || countAllowedKeys(palette, PALETTE_KEYS) < 0) return false;
  for (const key of PALETTE_REQUIRED) if (!(key in palette)) return false;
  for (const key in palette) {
    const colour = palette[key];
    if (typeof colour !== 'string' || !COLOUR.test(colour)) return false;
  }
  if (!isPlainObject(layout) || Object.keys(layout).length !== 3) return false;
  const { clockStyle, showSeconds, timezone } = layout;
  if (!CLOCK_STYLES.has(clockStyle) || typeof showSeconds !== 'boolean') return false;
  if (typeof timezone !== 'string' || !isValidTimeZone(timezone)) return false;
  if (!Array.isArray(assets) || assets.length > 100) return false;
  for (const asset of assets as unknown[]) {
    if (!isPlainObject(asset) || Object.keys(asset).length !== 3) return false;
    const { type: assetType, url, sha256 } = asset;
    if (!ASSET_TYPES.has(assetType) || typeof sha256 !== 'string' || !SHA256.test(sha256)) return false;
    if (typeof url !== 'string' || !assetUrlSchema.safeParse(url).success) return false;
  }
  return true;
}
