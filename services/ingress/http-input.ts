import type { IncomingMessage } from 'node:http';

/** ok is false when the header was repeated; value is then undefined. */
export interface HeaderResult {
  ok: boolean;
  value: string | undefined;
}

/**
 * node:http joins repeated headers with ", ", which would let `a, b` pass as one value;
 * headersDistinct keeps every occurrence so a repeat is refused instead of guessed at.
 */
export function singleHeader(req: IncomingMessage, name: string): HeaderResult {
  const values = req.headersDistinct[name];
  if (values === undefined || values.length === 0) return { ok: true, value: undefined };
  if (values.length > 1) return { ok: false, value: undefined };
  return { ok: true, value: values[0] };
}

const JSON_MEDIA_TYPE = /^application\/json\s*(?:;\s*charset\s*=\s*"?utf-8"?\s*)?$/i;

/** application/json, optionally with charset=utf-8; any other parameter or charset is refused. */
export function isJsonContentType(req: IncomingMessage): boolean {
  const values = req.headersDistinct['content-type'];
  return values !== undefined && values.length === 1 && JSON_MEDIA_TYPE.test(values[0]!.trim());
}

export type BodyResult = { kind: 'ok'; body: Buffer } | { kind: 'too_large' } | { kind: 'aborted' };

/** Reads the raw bytes (never a parsed-and-reserialised body) and stops at the limit. */
export function readRawBody(req: IncomingMessage, limitBytes: number): Promise<BodyResult> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let done = false;
    const finish = (result: BodyResult) => {
      if (done) return;
      done = true;
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      req.off('close', onClose);
      resolve(result);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limitBytes) {
        finish({ kind: 'too_large' });
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = () => finish({ kind: 'ok', body: chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size) });
    const onError = () => finish({ kind: 'aborted' });
    const onClose = () => {
      if (!req.complete) finish({ kind: 'aborted' });
    };
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
    req.on('close', onClose);
  });
}
