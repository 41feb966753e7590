/** Where the generated AsyncAPI document is committed. */
export const ASYNCAPI_FILE = new URL('../../../docs/asyncapi.json', import.meta.url);
