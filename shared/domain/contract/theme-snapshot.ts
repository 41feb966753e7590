import { z } from 'zod';

// `data` is the provider's model, not ours. The bridge checks only the few theme fields whose
// meaning it relies on, and only when they are present; every other field, known or not, is
// carried through unchanged to Postgres and to the applied topic. A provider adding a field must
// never break its integration. Providers who want their snapshots policed opt in to a strict JSON
// Schema per resource type in the sources file (see shared/domain/sources).

let knownTimeZones: ReadonlySet<string> | undefined;

// Intl lists only canonical zones and omits 'UTC' itself; valid IANA links ('Etc/UTC',
// 'US/Eastern') are accepted through the DateTimeFormat fallback. The fallback is also
// case-insensitive and takes offsets, so the name must look like an IANA name as written.
const IANA_NAME_SHAPE = /^[A-Z][A-Za-z0-9_+-]*(?:\/[A-Za-z0-9_+-]+)*$/;

export function isValidTimeZone(name: string): boolean {
  knownTimeZones ??= new Set([...Intl.supportedValuesOf('timeZone'), 'UTC']);
  if (knownTimeZones.has(name)) return true;
  if (name.length > 64 || !IANA_NAME_SHAPE.test(name)) return false;
  try {
    new Intl.DateTimeFormat('en', { timeZone: name });
    return true;
  } catch {
    return false;
  }
}

export const COLOUR_PATTERN = /^#(?:[0-9A-Fa-f]{3}|[0-9A-Fa-f]{6}|[0-9A-Fa-f]{8})$/;
/** `sha256:<64 hex>` as the contract writes it, or the bare hex digest. */
export const CHECKSUM_PATTERN = /^(?:sha256:)?[0-9A-Fa-f]{64}$/;

const colour = z.string().regex(COLOUR_PATTERN, { message: 'colour must be #RGB, #RRGGBB or #RRGGBBAA' });

/** Every string in a palette is a colour; anything else in it (nested groups, flags) passes through. */
export const themePaletteSchema = z
  .record(z.string(), z.union([colour, z.number(), z.boolean(), z.null(), z.array(z.unknown()), z.record(z.string(), z.unknown())]))
  .meta({ description: 'Colours by role (background, foreground, accent, ...); every string value is #RGB, #RRGGBB or #RRGGBBAA' });

export const themeLayoutSchema = z.looseObject({
  timezone: z
    .string()
    .refine(isValidTimeZone, { message: 'timezone must be an IANA time zone name' })
    .optional()
    .meta({
      description:
        'IANA time zone name, e.g. "Asia/Jakarta" or "UTC". Checked against the IANA database of the ' +
        'receiving runtime (not expressible in JSON Schema).',
    }),
});

export const assetUrlSchema = z
  .url({ protocol: /^https$/ })
  .max(2048)
  .meta({ description: 'https URL only' });

export const themeAssetSchema = z.looseObject({
  url: assetUrlSchema.optional(),
  checksum: z
    .string()
    .regex(CHECKSUM_PATTERN, { message: 'checksum must be sha256:<64 hex digits> or 64 hex digits' })
    .optional()
    .meta({ description: 'SHA-256 of the asset bytes: "sha256:<hex>" or plain hex' }),
});

export const themeSnapshotSchema = z
  .looseObject({
    palette: themePaletteSchema.optional(),
    layout: themeLayoutSchema.optional(),
    assets: z.array(themeAssetSchema).max(1000).optional(),
  })
  .meta({
    title: 'Theme snapshot v1 (what the bridge checks)',
    description:
      "The `data` of theme.created / theme.updated events: the full state of one theme, in the provider's own " +
      'model. Only the fields named here are checked, and only when present; every other field is carried through.',
  });

export type ThemeSnapshot = z.infer<typeof themeSnapshotSchema>;
