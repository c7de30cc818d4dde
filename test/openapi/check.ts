/**
 * Validates real answers against the OpenAPI document with Ajv (JSON Schema 2020-12, the
 * dialect of OpenAPI 3.1): the status must be documented for the operation, the documented
 * headers present, and the body valid against the documented schema.
 */
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { expect } from 'vitest';
import type { Json } from '../../handlers/openapi.js';

const DOC_ID = 'https://kslate.invalid/openapi.json';

/** What a test got back from the gateway. */
export interface Answer {
  status: number;
  headers: Headers;
  /** The parsed JSON body, or the text when it is not JSON ('' for none). */
  body: unknown;
}

export interface Checked {
  path: string;
  method: string;
  status: number;
  code?: string;
}

/** The document's component schemas under $defs of one Ajv schema, so every $ref resolves. */
export function ajvFor(doc: Json): Ajv2020 {
  const ajv = new Ajv2020({ strict: true, allErrors: true });
  addFormats.default(ajv);
  const schemas = (doc.components as Json).schemas as Json;
  ajv.addSchema(rebase({ $id: DOC_ID, $defs: schemas }) as Json);
  return ajv;
}

/**
 * `#/components/schemas/X` → a reference into the Ajv schema holding them. OpenAPI's
 * `discriminator` is left out: Ajv does not take its `mapping`, and the oneOf it annotates
 * already tells the bodies apart by their `error` const.
 */
function rebase(x: unknown): unknown {
  const text = JSON.stringify(x, (key, value) => (key === 'discriminator' ? undefined : value));
  return JSON.parse(text.replaceAll('"#/components/schemas/', `"${DOC_ID}#/$defs/`));
}

export function responseChecker(doc: Json) {
  const ajv = ajvFor(doc);
  const compiled = new Map<string, ValidateFunction>();
  const seen: Checked[] = [];
  const paths = doc.paths as Record<string, Record<string, Json>>;

  function check(method: string, path: string, a: Answer): void {
    const op = paths[path]?.[method.toLowerCase()];
    expect(op, `${method} ${path} is not in the document`).toBeDefined();
    const responses = op.responses as Record<string, Json>;
    const doc = responses[String(a.status)];
    expect(doc, `${method} ${path} answered ${a.status}, which the document does not list (${Object.keys(responses).join(', ')}): ${JSON.stringify(a.body).slice(0, 300)}`).toBeDefined();
    for (const name of Object.keys((doc.headers as Json | undefined) ?? {})) {
      if (name === 'Retry-After') continue; // only at the connection limit
      expect(a.headers.get(name), `${method} ${path} ${a.status} lacks header ${name}`).not.toBeNull();
    }
    const content = doc.content as Record<string, Json> | undefined;
    if (!content) {
      expect(a.body, `${method} ${path} ${a.status} is documented without a body`).toBe('');
    } else {
      const [type] = Object.keys(content);
      expect(a.headers.get('content-type') ?? '', `${method} ${path} ${a.status}: content type`).toContain(type);
      const key = `${method} ${path} ${a.status}`;
      let validate = compiled.get(key);
      if (!validate) {
        validate = ajv.compile(rebase(content[type].schema) as Json);
        compiled.set(key, validate);
      }
      const ok = validate(a.body);
      expect(ok, `${key}: ${ajv.errorsText(validate.errors, { separator: '\n' })}\nbody: ${JSON.stringify(a.body).slice(0, 600)}`).toBe(true);
    }
    const code = a.body && typeof a.body === 'object' && typeof (a.body as Json).error === 'string' ? ((a.body as Json).error as string) : undefined;
    seen.push({ path, method: method.toUpperCase(), status: a.status, code });
  }

  return { check, seen };
}

/** One request over fetch, answered as an `Answer`. */
export async function request(
  baseUrl: string,
  method: string,
  url: string,
  opts: { token?: string | null; body?: unknown; headers?: Record<string, string> } = {},
): Promise<Answer> {
  const headers: Record<string, string> = { ...(opts.headers ?? {}) };
  if (opts.token) headers.authorization = `Bearer ${opts.token}`;
  let payload: string | undefined;
  if (opts.body !== undefined) {
    payload = typeof opts.body === 'string' ? opts.body : JSON.stringify(opts.body);
    headers['content-type'] ??= 'application/json';
  }
  const res = await fetch(baseUrl + url, { method, headers, body: payload });
  const text = await res.text();
  let body: unknown = text;
  try {
    body = text === '' ? '' : JSON.parse(text);
  } catch {
    /* keep the text */
  }
  return { status: res.status, headers: res.headers, body };
}

/**
 * For a `text/event-stream` answer: a validator of the JSON `data` of one event, from the
 * schema the document gives under the media type's `x-event-data` (tests of a stream parse
 * each event and call it; a stream has no end for `check` to read to).
 */
export function eventDataValidator(doc: Json, method: string, path: string, status = 200): (data: unknown) => string | null {
  const op = (doc.paths as Record<string, Record<string, Json>>)[path]?.[method.toLowerCase()];
  if (!op) throw new Error(`${method} ${path} is not in the document`);
  const media = (((op.responses as Record<string, Json>)[String(status)]?.content as Record<string, Json> | undefined) ?? {})['text/event-stream'];
  if (!media?.['x-event-data']) throw new Error(`${method} ${path} ${status} is not a documented event stream`);
  const ajv = ajvFor(doc);
  const validate = ajv.compile(rebase(media['x-event-data']) as Json);
  return (data) => (validate(data) ? null : ajv.errorsText(validate.errors));
}
