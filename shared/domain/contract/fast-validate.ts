// A fast acceptance check for the common case: a well-formed v1 event (for themes, with a snapshot
// that passes the theme checks). It accepts only what the zod schemas accept (a property test
// holds it to that), and anything it is unsure of goes to zod, which then produces the same
// result and error messages as always. zod is ~half the cost of parseEvent, which runs on every
// webhook (ingress) and every consumed record (worker).
import { EVENT_TYPE_PATTERN, KEY_SEGMENT_PATTERN, occurredAtSchema, RESOURCE_TYPE_PATTERN } from './envelope.ts';
import { assetUrlSchema, CHECKSUM_PATTERN, COLOUR_PATTERN, isValidTimeZone } from './theme-snapshot.ts';

const ENVELOPE_KEYS: ReadonlySet<string> = new Set([
  'event_id',
  'event_type',
  'event_version',
  'occurred_at',
  'delivery_attempt',
  'tenant_id',
  'idempotency_key',
  'resource',
  'data',
]);

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
 * whose data passes its resource type's checks (or is absent / {} for a deletion). False means "ask zod".
 */
export function isCertainlyValidEvent(value: Obj): boolean {
  if (countAllowedKeys(value, ENVELOPE_KEYS) < 0) return false;
  const { event_id, event_type, event_version, occurred_at, delivery_attempt, tenant_id, idempotency_key, resource, data } = value;
  if (event_version !== 1) return false;
  if (!boundedString(event_id, 1, 200)) return false;
  if (typeof event_type !== 'string' || !EVENT_TYPE_PATTERN.test(event_type)) return false;
  if (typeof tenant_id !== 'string' || !KEY_SEGMENT_PATTERN.test(tenant_id)) return false;
  if (delivery_attempt !== undefined && !isInt(delivery_attempt, 1)) return false;
  if (idempotency_key !== undefined && !boundedString(idempotency_key, 1, 200)) return false;
  if (!isPlainObject(resource) || countAllowedKeys(resource, RESOURCE_KEYS) < 2) return false;
  const { type, id, version } = resource;
  if (typeof type !== 'string' || !RESOURCE_TYPE_PATTERN.test(type)) return false;
  // version may be absent (a source ordering by occurred_at); whether it may be is the ingress's call.
  if (typeof id !== 'string' || !KEY_SEGMENT_PATTERN.test(id) || (version !== undefined && !isInt(version, 0))) return false;
  const dot = event_type.indexOf('.');
  if (event_type.slice(0, dot) !== type) return false;
  if (typeof occurred_at !== 'string' || !occurredAtSchema.safeParse(occurred_at).success) return false;
  if (event_type.slice(dot + 1) === 'deleted') return data === undefined || (isPlainObject(data) && Object.keys(data).length === 0);
  if (!isPlainObject(data)) return false;
  return type === 'theme' ? isCertainlyValidThemeSnapshot(data) : true;
}

const RESOURCE_KEYS: ReadonlySet<string> = new Set(['type', 'id', 'version']);

function isCertainlyValidThemeSnapshot(data: Obj): boolean {
  const { palette, layout, assets } = data;
  if (palette !== undefined) {
    if (!isPlainObject(palette)) return false;
    for (const key in palette) {
      const colour = palette[key];
      if (typeof colour === 'string' && !COLOUR_PATTERN.test(colour)) return false;
    }
  }
  if (layout !== undefined) {
    if (!isPlainObject(layout)) return false;
    const { timezone } = layout;
    if (timezone !== undefined && (typeof timezone !== 'string' || !isValidTimeZone(timezone))) return false;
  }
  if (assets !== undefined) {
    if (!Array.isArray(assets) || assets.length > 1000) return false;
    for (const asset of assets as unknown[]) {
      if (!isPlainObject(asset)) return false;
      const { url, checksum } = asset;
      if (checksum !== undefined && (typeof checksum !== 'string' || !CHECKSUM_PATTERN.test(checksum))) return false;
      if (url !== undefined && (typeof url !== 'string' || !assetUrlSchema.safeParse(url).success)) return false;
    }
  }
  return true;
}
