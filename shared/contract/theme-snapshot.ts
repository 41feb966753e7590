import { z } from 'zod';

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

const colour = z.string().regex(/^#[0-9A-Fa-f]{6}$/, { message: 'colour must be #RRGGBB' });

export const themePaletteSchema = z.strictObject({
  primary: colour,
  background: colour,
  text: colour,
  secondary: colour.optional(),
  surface: colour.optional(),
  accent: colour.optional(),
});

export const themeLayoutSchema = z.strictObject({
  clockStyle: z.enum(['analog', 'digital', 'minimal']),
  showSeconds: z.boolean(),
  timezone: z
    .string()
    .refine(isValidTimeZone, { message: 'timezone must be an IANA time zone name' })
    .meta({
      description:
        'IANA time zone name, e.g. "Europe/Berlin" or "UTC". Checked against the IANA database of the ' +
        'receiving runtime (not expressible in JSON Schema).',
    }),
});

export const assetUrlSchema = z.url({ protocol: /^https$/ }).max(2048).meta({ description: 'https URL only' });

export const themeAssetSchema = z.strictObject({
  type: z.enum(['image', 'font', 'icon', 'sound']),
  url: assetUrlSchema,
  sha256: z
    .string()
    .regex(/^[0-9a-f]{64}$/, { message: 'sha256 must be 64 lowercase hex characters' })
    .meta({ description: 'SHA-256 of the asset bytes, lowercase hex' }),
});

export const themeSnapshotSchema = z
  .strictObject({
    slug: z
      .string()
      .max(100)
      .regex(/^[a-z0-9]+(?:-[a-z0-9]+)*$/, { message: 'slug must be kebab-case' }),
    name: z.string().min(1).max(200),
    status: z.enum(['draft', 'published', 'archived']),
    palette: themePaletteSchema,
    layout: themeLayoutSchema,
    assets: z.array(themeAssetSchema).max(100),
  })
  .meta({
    title: 'Theme snapshot v1',
    description: 'The `data` of theme.created / theme.updated events: the full state of one theme.',
  });

export type ThemeSnapshot = z.infer<typeof themeSnapshotSchema>;
