// The committed copy of the OpenAPI document, docs/openapi.json, formatted as the repository's
// prettier formats it (so `prettier --check .` holds). For the writer and its test, not the service.
import { format, resolveConfig } from 'prettier';
import { renderOpenApi } from './openapi.ts';

export const OPENAPI_FILE = new URL('../../../docs/openapi.json', import.meta.url);

export async function formattedOpenApi(): Promise<string> {
  const options = (await resolveConfig(OPENAPI_FILE)) ?? {};
  return format(renderOpenApi(), { ...options, filepath: OPENAPI_FILE.pathname });
}
