import { readFileSync } from 'node:fs';
import path from 'node:path';
import { Ajv2020, type ErrorObject } from 'ajv/dist/2020.js';
import formats from 'ajv-formats';

// ajv-formats is CommonJS with `exports.default`: under NodeNext the default import is the module.
const addFormats = formats.default;

/**
 * A JSON Schema an operator wrote for one resource type of one source: a source opts in to having
 * its snapshots policed (the bridge's own checks of `data` are deliberately loose). Draft 2020-12,
 * with ajv's formats (uri, date-time, email, ...).
 */
export interface StrictSchema {
  /** Where the schema was read from, for messages. */
  file: string;
  /** undefined when `data` conforms; otherwise the first problems, one line. */
  check: (data: unknown) => string | undefined;
}

const MAX_REPORTED = 10;

/** One compiler for every source: ajv caches compiled schemas by their content. */
let compiler: Ajv2020 | undefined;

function ajv(): Ajv2020 {
  if (compiler === undefined) {
    // Unknown keywords are errors (they are typos); type and tuple style hints are not.
    compiler = new Ajv2020({ allErrors: true, strictTypes: false, strictTuples: false, allowUnionTypes: true });
    addFormats(compiler);
  }
  return compiler;
}

/** Reads and compiles a schema file; throws an Error whose message names the file and the problem. */
export function loadStrictSchema(file: string, baseDir: string): StrictSchema {
  const resolved = path.resolve(baseDir, file);
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(resolved, 'utf8'));
  } catch (error) {
    throw new Error(`cannot read JSON Schema ${resolved}: ${(error as Error).message}`);
  }
  return compileStrictSchema(json, resolved);
}

/**
 * Compiles a schema held as a value (a source stored in Postgres keeps its schemas inline); `label`
 * names it in messages. Throws an Error whose message says what is wrong.
 */
export function compileStrictSchema(json: unknown, label: string): StrictSchema {
  if (typeof json !== 'object' || json === null || Array.isArray(json)) throw new Error(`${label} is not a JSON Schema object`);
  let validate;
  try {
    // $id would make two sources sharing one schema collide in ajv's registry; the label is the identity here.
    const { $id: _ignored, ...schema } = json as Record<string, unknown>;
    validate = ajv().compile(schema);
  } catch (error) {
    throw new Error(`invalid JSON Schema ${label}: ${(error as Error).message}`);
  }
  return {
    file: label,
    check: (data) => (validate(data) ? undefined : formatErrors(validate.errors ?? [])),
  };
}

function formatErrors(errors: readonly ErrorObject[]): string {
  const shown = errors.slice(0, MAX_REPORTED).map((e) => `data${e.instancePath.replaceAll('/', '.')}: ${e.message ?? e.keyword}`);
  const more = errors.length - shown.length;
  return more > 0 ? `${shown.join('; ')}; and ${more} more` : shown.join('; ');
}
