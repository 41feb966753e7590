import { RECONCILE_PLACEHOLDERS } from '#domain/sources/index.ts';

export type ResourceRefValues = Record<(typeof RECONCILE_PLACEHOLDERS)[number], string>;

/**
 * Expands `https://provider.example/api/{type}s/{id}`. Every value is URL-encoded as one path
 * segment or query value, so an id such as `a/../b` or `x?y` can never change which resource the
 * request names. Unknown placeholders are refused (the sources schema refuses them earlier).
 */
export function expandUrlTemplate(template: string, values: ResourceRefValues): string {
  const url = template.replace(/\{([^}]*)\}/g, (_, name: string) => {
    if (!(RECONCILE_PLACEHOLDERS as readonly string[]).includes(name)) throw new Error(`unknown placeholder {${name}}`);
    return encodeURIComponent(values[name as keyof ResourceRefValues]);
  });
  // Throws on a template that does not expand to a URL.
  return new URL(url).toString();
}
