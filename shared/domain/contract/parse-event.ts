import { hash } from 'node:crypto';
import type { z } from 'zod';
import { checkEventVersion, eventAction, eventEnvelopeSchema } from './envelope.ts';
import type { ReceivedEnvelope } from './envelope.ts';
import { isCertainlyValidEvent } from './fast-validate.ts';
import { themeSnapshotSchema } from './theme-snapshot.ts';

export const DEFAULT_MAX_DEPTH = 32;

// These keys must never reach an object merge or spread downstream (prototype pollution).
export const FORBIDDEN_KEYS: ReadonlySet<string> = new Set(['__proto__', 'constructor', 'prototype']);

export type ParseErrorCode =
  | 'invalid_utf8'
  | 'invalid_json'
  | 'too_deep'
  | 'forbidden_key'
  | 'invalid_string'
  | 'unknown_event_version'
  | 'invalid_envelope'
  | 'invalid_data';

export type ParseEventResult =
  { ok: true; envelope: ReceivedEnvelope; bodySha256: string } | { ok: false; code: ParseErrorCode; message: string; bodySha256: string };

export interface ParseEventOptions {
  maxDepth?: number;
}

const dataSchemas: Readonly<Record<string, z.ZodType>> = {
  theme: themeSnapshotSchema,
};

const MAX_REPORTED_ISSUES = 10;

// ignoreBOM keeps a BOM in the text so JSON.parse rejects it: the raw bytes go to Kafka
// unchanged and several consumers' JSON parsers refuse a BOM. A non-streaming decode() keeps no
// state between calls, so one decoder serves every call.
const utf8Decoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

export function parseEvent(rawBytes: Uint8Array, options: ParseEventOptions = {}): ParseEventResult {
  const maxDepth = options.maxDepth ?? DEFAULT_MAX_DEPTH;
  // crypto.hash: one call, no Hash object per request (createHash().update().digest() built one).
  const bodySha256 = hash('sha256', rawBytes, 'hex');

  let text: string;
  try {
    text = utf8Decoder.decode(rawBytes);
  } catch {
    return failure(bodySha256, 'invalid_utf8', 'body is not valid UTF-8');
  }

  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    // The engine's message quotes part of the body, which must not reach logs or callers.
    return failure(bodySha256, 'invalid_json', 'body is not valid JSON');
  }

  const structure = walkStructure(value, maxDepth);
  if (typeof structure !== 'number') return failure(bodySha256, structure.code, structure.message);

  // JSON.parse keeps the last of duplicate keys while other consumers of the same raw bytes
  // may keep the first, so a duplicate would let two readers see two different events. Each
  // duplicate leaves the parsed value one key short of the text, so only a shortfall needs the
  // scan that names the key.
  if (structure !== countKeys(text)) {
    const duplicate = findDuplicateKey(text);
    if (duplicate !== undefined) return failure(bodySha256, 'invalid_json', `duplicate key ${JSON.stringify(duplicate)}`);
  }

  const version = checkEventVersion(value);
  if (!version.ok) return failure(bodySha256, version.code, version.message);

  // The envelope returned is always the parsed value itself, never zod's output: `data` must reach
  // Postgres and the applied topic exactly as the provider sent it. The common case is checked
  // without zod; anything else gets zod's verdict and messages below.
  const envelope = value as ReceivedEnvelope;
  if (isCertainlyValidEvent(value as Record<string, unknown>)) return { ok: true, envelope, bodySha256 };

  const envelopeResult = eventEnvelopeSchema.safeParse(value);
  if (!envelopeResult.success) return failure(bodySha256, 'invalid_envelope', formatIssues(envelopeResult.error.issues));

  if (eventAction(envelope) === 'delete') {
    if (envelope.data !== undefined && Object.keys(envelope.data).length > 0) {
      return failure(bodySha256, 'invalid_data', `data must be absent or {} for ${envelope.event_type}`);
    }
    return { ok: true, envelope, bodySha256 };
  }
  // Resource types without checks of their own (palettes, catalogues, ...) need only an object.
  const dataSchema = dataSchemas[envelope.resource.type];
  if (dataSchema === undefined) return { ok: true, envelope, bodySha256 };
  const dataResult = dataSchema.safeParse(envelope.data);
  if (!dataResult.success) return failure(bodySha256, 'invalid_data', formatIssues(dataResult.error.issues, ['data']));
  return { ok: true, envelope, bodySha256 };
}

// Module-level rather than a closure per call (tsx's keepNames wraps every named closure).
function failure(bodySha256: string, code: ParseErrorCode, message: string): ParseEventResult {
  return { ok: false, code, message, bodySha256 };
}

type StructureProblem = { code: 'too_deep' | 'forbidden_key' | 'invalid_string'; message: string };

/**
 * Postgres cannot store U+0000 in text or jsonb, nor a lone surrogate (JSON's `\ud800` escape
 * parses to one): such a string would pass every other check, be acknowledged, and then fail the
 * worker's whole chunk. It is refused at the door instead.
 */
export function isStorableString(value: string): boolean {
  return value.isWellFormed() && !value.includes('\u0000');
}

/**
 * Depth counts containers: `{}` is depth 1, `{"a":[]}` is depth 2. Walks the parsed value in
 * document order (an object's integer-like keys first, as JavaScript orders them) without
 * allocating per value (it runs on every event in both services): where a value sits is spelled
 * out only for the error message.
 */
export function checkStructure(value: unknown, maxDepth: number = DEFAULT_MAX_DEPTH): StructureProblem | undefined {
  const walked = walkStructure(value, maxDepth);
  return typeof walked === 'number' ? undefined : walked;
}

/** checkStructure recurses once per level, so its bound keeps the stack small. */
export const MAX_SUPPORTED_DEPTH = 1000;

/** checkStructure's walk; when the value passes, the number of object keys it holds. */
function walkStructure(value: unknown, maxDepth: number): StructureProblem | number {
  if (!(maxDepth >= 1 && maxDepth <= MAX_SUPPORTED_DEPTH))
    throw new RangeError(`maxDepth must be 1-${MAX_SUPPORTED_DEPTH}, not ${maxDepth}`);
  return checkValue(value, 1, maxDepth, '', 0);
}

/** `key` and `arrays` name where `current` sits: under that key, inside that many arrays (`key[][]`). */
function checkValue(current: unknown, depth: number, maxDepth: number, key: string, arrays: number): StructureProblem | number {
  if (typeof current === 'string') {
    return isStorableString(current) ? 0 : unstorable(`the value under ${JSON.stringify(key + '[]'.repeat(arrays))}`);
  }
  if (typeof current !== 'object' || current === null) return 0;
  if (depth > maxDepth) return { code: 'too_deep', message: `nesting deeper than ${maxDepth}` };
  let keys = 0;
  if (Array.isArray(current)) {
    for (let i = 0; i < current.length; i += 1) {
      const inner = checkValue(current[i], depth + 1, maxDepth, key, arrays + 1);
      if (typeof inner !== 'number') return inner;
      keys += inner;
    }
    return keys;
  }
  for (const child in current) {
    if (FORBIDDEN_KEYS.has(child)) return { code: 'forbidden_key', message: `forbidden key ${JSON.stringify(child)}` };
    if (!isStorableString(child)) return unstorable(`a key under ${JSON.stringify(key + '[]'.repeat(arrays))}`);
    const inner = checkValue((current as Record<string, unknown>)[child], depth + 1, maxDepth, child, 0);
    if (typeof inner !== 'number') return inner;
    keys += inner + 1;
  }
  return keys;
}

function unstorable(where: string): StructureProblem {
  return { code: 'invalid_string', message: `${where} contains U+0000 or a lone surrogate, which cannot be stored` };
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COLON = 0x3a;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;

/**
 * Expects text that JSON.parse has already accepted. The keys of each open object are kept in an
 * array while it is small (a linear scan of a few keys beats creating and hashing into a Set) and
 * in a Set from SMALL_OBJECT_KEYS on.
 */
export function findDuplicateKey(text: string): string | undefined {
  const containers: Array<string[] | Set<string> | null> = [];
  let i = 0;
  while (i < text.length) {
    const ch = text.charCodeAt(i);
    if (ch === QUOTE) {
      let end = i + 1;
      let escaped = false;
      for (;;) {
        const c = text.charCodeAt(end);
        if (c === BACKSLASH) {
          escaped = true;
          end += 2;
        } else if (c === QUOTE) {
          break;
        } else {
          end += 1;
        }
      }
      const keys = containers.at(-1);
      if (keys) {
        let next = end + 1;
        while (isJsonWhitespace(text.charCodeAt(next))) next += 1;
        if (text.charCodeAt(next) === COLON) {
          const key = escaped ? (JSON.parse(text.slice(i, end + 1)) as string) : text.slice(i + 1, end);
          if (Array.isArray(keys)) {
            if (keys.includes(key)) return key;
            keys.push(key);
            if (keys.length === SMALL_OBJECT_KEYS) containers[containers.length - 1] = new Set(keys);
          } else {
            if (keys.has(key)) return key;
            keys.add(key);
          }
        }
      }
      i = end + 1;
      continue;
    }
    if (ch === OPEN_BRACE) containers.push([]);
    else if (ch === OPEN_BRACKET) containers.push(null);
    else if (ch === CLOSE_BRACE || ch === CLOSE_BRACKET) containers.pop();
    i += 1;
  }
  return undefined;
}

const SMALL_OBJECT_KEYS = 16;

/**
 * The object keys written in JSON text that JSON.parse has accepted: every string followed by a
 * colon. Allocates nothing.
 */
export function countKeys(text: string): number {
  let keys = 0;
  let i = 0;
  while (i < text.length) {
    if (text.charCodeAt(i) !== QUOTE) {
      i += 1;
      continue;
    }
    let end = i + 1;
    for (;;) {
      const c = text.charCodeAt(end);
      if (c === BACKSLASH) end += 2;
      else if (c === QUOTE) break;
      else end += 1;
    }
    let next = end + 1;
    while (isJsonWhitespace(text.charCodeAt(next))) next += 1;
    if (text.charCodeAt(next) === COLON) keys += 1;
    i = end + 1;
  }
  return keys;
}

function isJsonWhitespace(c: number): boolean {
  return c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d;
}

function formatIssues(issues: readonly z.core.$ZodIssue[], prefix: readonly string[] = []): string {
  const shown = issues.slice(0, MAX_REPORTED_ISSUES).map((issue) => {
    const path = [...prefix, ...issue.path.map(String)].join('.');
    return `${path === '' ? '(root)' : path}: ${issue.message}`;
  });
  const more = issues.length - shown.length;
  return more > 0 ? `${shown.join('; ')}; and ${more} more` : shown.join('; ');
}
