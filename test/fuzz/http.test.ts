/**
 * Fuzz over HTTP (issue 10): thousands of seeded requests per operation — junk bodies, junk
 * parameters, odd ids — must never get a 5xx or a dropped connection. See cases.ts to replay.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { KEYS, type TestGateway } from '../setup/gateway.js';
import { OPS, RUNS, SEED, opCases, runAll, show } from './cases.js';
import { fuzzGateway, tally, whoFor } from './setup.js';

let t: TestGateway;
beforeAll(async () => {
  t = await fuzzGateway();
});
afterAll(() => t?.close());

const PATHS = {
  get: (r: string) => ['GET', `/v1/records/${r}`],
  put: (r: string, f: string) => ['PUT', `/v1/records/${r}/fields/${f}`],
  append: (r: string, f: string) => ['POST', `/v1/records/${r}/fields/${f}/entries`],
  claim: (r: string, f: string) => ['PUT', `/v1/records/${r}/fields/${f}/claim`],
  checkpointSave: (r: string) => ['PUT', `/v1/records/${r}/checkpoint`],
  checkpointLoad: (r: string) => ['GET', `/v1/records/${r}/checkpoint`],
  query: (r: string) => ['GET', `/v1/records/${r}`],
} as const;

const text = (v: unknown) => (typeof v === 'string' ? v : JSON.stringify(v));
/**
 * Percent-encode as a client would; a lone surrogate (which encodeURIComponent refuses)
 * goes as the bytes of its WTF-8 form, which are not valid UTF-8: the server must cope.
 */
const enc = (s: string) =>
  s.replace(/[\ud800-\udfff]/g, (c) => `\u0000LONE${c.charCodeAt(0).toString(16)}\u0000`)
    .split('\u0000')
    .map((part) => (part.startsWith('LONE') ? [...Buffer.from([0xe0 | (parseInt(part.slice(4), 16) >> 12), 0x80 | ((parseInt(part.slice(4), 16) >> 6) & 0x3f), 0x80 | (parseInt(part.slice(4), 16) & 0x3f)])].map((b) => `%${b.toString(16).toUpperCase()}`).join('') : encodeURIComponent(part)))
    .join('');
const seg = (v: unknown) => {
  const s = text(v) ?? '';
  // "<class>/<id>" stays two segments; each part is encoded, as a client would.
  return s.split('/').slice(0, 2).map(enc).join('/') || 'x';
};

/** Junk bodies sent in place of the JSON of every seventh case. */
const junk = fc.sample(
  fc.oneof(fc.string({ maxLength: 40 }), fc.constantFrom('{', '[]', 'null', '{"value":', '\u0000', '{"value":1}{"value":2}', 'value=1')),
  { seed: SEED, numRuns: RUNS },
);

it.each(OPS)('%s: no 5xx and no dropped connection', async (op) => {
  const cases = opCases(op);
  const seen = tally();
  const failures = await runAll(cases, 8, async (args, i) => {
    const { record, field, class: cls, ...rest } = args as Record<string, unknown>;
    const reads = op === 'get' || op === 'checkpointLoad' || op === 'query';
    const [method, path] = op === 'query' ? PATHS.query(enc(text(cls) ?? '')) : PATHS[op](seg(record), enc(text(field) ?? ''));
    // Now and then a path with a broken escape, as a hostile client would send it.
    let url = t.url + (i % 13 === 5 ? path.replace(/\/([^/]*)$/, '/%$1') : i % 13 === 6 ? `${path}%ED%A0%80` : path);
    let body: string | undefined;
    if (reads) {
      const flat = op === 'query' && rest.filters && typeof rest.filters === 'object' && !Array.isArray(rest.filters) ? { ...(rest.filters as object), ...rest, filters: undefined } : rest;
      const qs = Object.entries(flat)
        .filter(([, v]) => v !== undefined)
        .map(([k, v]) => `${enc(k)}=${enc(Array.isArray(v) && k === 'fields' ? v.map(text).join(',') : (text(v) ?? ''))}`)
        .join('&');
      if (qs) url += `?${qs}`;
    } else {
      body = i % 7 === 3 ? junk[i] : JSON.stringify(rest);
    }
    const who = whoFor(i);
    const res = await fetch(url, {
      method,
      headers: { authorization: `Bearer ${KEYS[who] ?? who}`, 'content-type': 'application/json', ...(i % 11 === 0 ? { 'x-svc-scope': `fz-${i % 3}` } : {}) },
      body,
      signal: AbortSignal.timeout(20_000),
    });
    const answer = await res.text();
    let code = 'OK';
    if (res.status >= 400) {
      try {
        code = JSON.parse(answer).error;
      } catch {
        return `${res.status} without a JSON error body for ${method} ${url.slice(0, 200)}`;
      }
    }
    seen.add(code);
    return res.status >= 500 ? `${res.status} ${answer.slice(0, 300)} for case ${i}: ${method} ${url.slice(0, 200)} ${show(body)}` : null;
  });
  console.log(`fuzz http ${op}: ${cases.length} requests (seed ${SEED}): ${seen}`);
  expect(failures.slice(0, 5), `failures (replay with KSLATE_FUZZ_SEED=${SEED})`).toEqual([]);
}, 300_000);
