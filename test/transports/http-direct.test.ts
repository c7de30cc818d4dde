/**
 * The Node adapter's direct path for API reads (runtime/http/direct.ts; docs/performance.md
 * "the HTTP direct path for reads") answers exactly what Hono answers. Two gateways on ONE database (reads
 * only, so the same rows and times), one with the direct path (the default) and one with
 * `http: { direct: false }`, get the same raw HTTP/1.1 requests over real sockets. For each:
 * the same status, the same headers but Date, the same body bytes (generated request ids
 * aside). Each request also says which path the direct gateway must take: every request Hono
 * routes reads X-Request-Id in the app's first middleware (HonoRequest#header), counted here.
 */
import { connect } from 'node:net';
import { HonoRequest } from 'hono/request';
import { afterAll, beforeAll, describe, expect, test, vi } from 'vitest';
import { incident } from '../fixtures/classes.js';
import { KEYS, startTestGateway, type TestGateway } from '../setup/gateway.js';

let direct: TestGateway;
let hono: TestGateway;

/** Hono's requests so far (both gateways run in this process). */
const viaHono = vi.spyOn(HonoRequest.prototype, 'header');

beforeAll(async () => {
  direct = await startTestGateway([incident]);
  hono = await startTestGateway([incident], { db: { ...direct.db, drop: async () => undefined }, gateway: { http: { direct: false } } });
  const put = (rid: string, field: string, value: unknown, expected_version = 0) =>
    direct.call('alice', 'PUT', `/v1/records/incident/${rid}/fields/${field}`, { value, expected_version });
  for (const [rid, field, value, expected] of [
    ['r1', 'title', 'first', 0],
    ['r1', 'title', 'second', 1],
    ['r1', 'severity', 2, 0],
    ['r1', 'secret', 'only responders', 0],
    ['r2', 'title', 'other', 0],
    ['r3', 'title', 'ünïcødé ✓ 🦊', 0],
  ] as const) {
    const r = await put(rid, field, value, expected);
    expect(r.status, JSON.stringify(r.body)).toBeLessThan(300);
  }
  const note = await direct.call('alice', 'POST', '/v1/records/incident/r1/fields/notes/entries', { entry: { n: 1 }, evidence: 'seen in the test' });
  expect(note.status, JSON.stringify(note.body)).toBeLessThan(300);
}, 120_000);

afterAll(async () => {
  await hono?.close();
  await direct?.close();
});

interface Answer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** A generated X-Request-Id (a UUID) differs per gateway; everything else must not. */
const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g;

/** One request as raw HTTP/1.1 (Connection: close), its answer parsed from the bytes. */
function raw(url: string, target: string, headers: [string, string][], method = 'GET', body = '', version = '1.1'): Promise<Answer> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname);
    const chunks: Buffer[] = [];
    socket.on('data', (d) => chunks.push(d));
    socket.on('error', reject);
    socket.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      const split = text.indexOf('\r\n\r\n');
      const [statusLine, ...lines] = text.slice(0, split).split('\r\n');
      const out: Record<string, string> = {};
      for (const l of lines) {
        const i = l.indexOf(':');
        const name = l.slice(0, i).toLowerCase();
        if (name !== 'date') out[name] = l.slice(i + 1).trim();
      }
      resolve({ status: Number(statusLine.split(' ')[1]), headers: out, body: text.slice(split + 4) });
    });
    const head = [`${method} ${target} HTTP/${version}`, ...headers.map(([n, v]) => `${n}: ${v}`), 'Connection: close', '', ''].join('\r\n');
    socket.write(head + body);
  });
}

const comparable = (a: Answer): Answer => ({
  status: a.status,
  headers: Object.fromEntries(Object.entries(a.headers).map(([n, v]) => [n, v.replace(UUID, '<uuid>')])),
  body: a.body.replace(UUID, '<uuid>'),
});

const HOST: [string, string] = ['Host', 'kslate.test'];
const auth = (who: string): [string, string] => ['Authorization', `Bearer ${KEYS[who]}`];

interface Case {
  name: string;
  target: string;
  headers?: [string, string][];
  version?: '1.0';
  /** The direct gateway must answer without Hono (true) or hand it to Hono (false). */
  taken: boolean;
  status: number;
}

const cases: Case[] = [
  { name: 'a record', target: '/v1/records/incident/r1', headers: [HOST, auth('alice')], taken: true, status: 200 },
  { name: 'a reader of some fields', target: '/v1/records/incident/r1', headers: [HOST, auth('bob')], taken: true, status: 200 },
  { name: 'no such record', target: '/v1/records/incident/nope', headers: [HOST, auth('alice')], taken: true, status: 404 },
  { name: 'no such class', target: '/v1/records/ghost/r1', headers: [HOST, auth('alice')], taken: true, status: 404 },
  { name: 'an id the class refuses', target: '/v1/records/incident/UPPER', headers: [HOST, auth('alice')], taken: true, status: 400 },
  { name: 'no credential: 401 with WWW-Authenticate', target: '/v1/records/incident/r1', headers: [HOST], taken: true, status: 401 },
  { name: 'a wrong key: 401 invalid_token', target: '/v1/records/incident/r1', headers: [HOST, ['Authorization', 'Bearer wrong']], taken: true, status: 401 },
  {
    name: 'two Authorization lines (joined as Headers joins them)',
    target: '/v1/records/incident/r1',
    headers: [HOST, auth('alice'), auth('alice')],
    taken: true,
    status: 401,
  },
  { name: 'a well-formed X-Request-Id is echoed', target: '/v1/records/incident/r1', headers: [HOST, auth('alice'), ['X-Request-Id', 'trace-42']], taken: true, status: 200 },
  { name: 'a malformed X-Request-Id is replaced', target: '/v1/records/incident/r1', headers: [HOST, auth('alice'), ['X-Request-Id', 'a b']], taken: true, status: 200 },
  { name: 'a scope', target: '/v1/records/incident/r1', headers: [HOST, auth('alice'), ['X-Svc-Scope', 'team-a']], taken: true, status: 200 },
  { name: 'a malformed min LSN', target: '/v1/records/incident/r1', headers: [HOST, auth('alice'), ['X-Kslate-Min-Lsn', 'zz']], taken: true, status: 400 },
  { name: 'entries_limit', target: '/v1/records/incident/r1?entries_limit=1', headers: [HOST, auth('alice')], taken: true, status: 200 },
  { name: 'an unknown parameter', target: '/v1/records/incident/r1?colour=red', headers: [HOST, auth('alice')], taken: true, status: 400 },
  { name: 'history with characters of 2 to 4 bytes (a page in parts)', target: '/v1/records/incident/r3/history', headers: [HOST, auth('alice')], taken: true, status: 200 },
  { name: 'history, a page of 2', target: '/v1/records/incident/r1/history?limit=2', headers: [HOST, auth('alice')], taken: true, status: 200 },
  { name: 'query by field value', target: '/v1/records/incident?title=other', headers: [HOST, auth('alice')], taken: true, status: 200 },
  { name: 'query, "+" in a value', target: '/v1/records/incident?title=a+b&limit=5', headers: [HOST, auth('alice')], taken: true, status: 200 },
  { name: 'the class list', target: '/v1/classes', headers: [HOST, auth('alice')], taken: true, status: 200 },
  { name: 'a class', target: '/v1/classes/incident', headers: [HOST, auth('alice')], taken: true, status: 200 },
  { name: 'a checkpoint', target: '/v1/records/incident/r1/checkpoint', headers: [HOST, auth('alice')], taken: true, status: 200 },
  // Left to Hono: what @hono/node-server rewrites or refuses, and routes that are not reads.
  { name: 'a percent-encoded id', target: '/v1/records/incident/r%31', headers: [HOST, auth('alice')], taken: false, status: 200 },
  { name: 'a dot segment', target: '/v1/records/incident/../ghost/r1', headers: [HOST, auth('alice')], taken: false, status: 404 },
  { name: 'a trailing slash', target: '/v1/records/incident/r1/', headers: [HOST, auth('alice')], taken: false, status: 404 },
  { name: 'a Host in capitals', target: '/v1/records/incident/r1', headers: [['Host', 'KSLATE.test'], auth('alice')], taken: false, status: 200 },
  { name: 'HTTP/1.0 without a Host', target: '/v1/records/incident/r1', headers: [auth('alice')], taken: false, status: 200, version: '1.0' },
  { name: 'a path with a POST route only', target: '/v1/records/incident/r1/fields/notes/entries', headers: [HOST, auth('alice')], taken: false, status: 405 },
  { name: 'a watch stream (refused: no credential)', target: '/v1/records/incident/r1/watch', headers: [HOST], taken: false, status: 401 },
  { name: 'not an API path', target: '/healthz', headers: [HOST], taken: false, status: 200 },
];

describe('a GET answered directly is byte for byte what Hono answers', () => {
  test.each(cases)('$name', async (c) => {
    const before = viaHono.mock.calls.length;
    const a = await raw(direct.url, c.target, c.headers ?? [], 'GET', '', c.version);
    const viaHonoOnDirect = viaHono.mock.calls.length > before;
    const b = await raw(hono.url, c.target, c.headers ?? [], 'GET', '', c.version);
    expect(a.status).toBe(c.status);
    expect(comparable(a)).toEqual(comparable(b));
    expect(viaHonoOnDirect).toBe(!c.taken);
  });

  test('a 401 says how to authenticate; an answer carries its request id and length', async () => {
    const a = await raw(direct.url, '/v1/records/incident/r1', [HOST, ['Authorization', 'Bearer wrong']]);
    expect(a.headers['www-authenticate']).toBe('Bearer realm="kslate", error="invalid_token"');
    const ok = await raw(direct.url, '/v1/records/incident/r1', [HOST, auth('alice'), ['X-Request-Id', 'trace-7']]);
    expect(ok.headers['x-request-id']).toBe('trace-7');
    expect(Number(ok.headers['content-length'])).toBe(Buffer.byteLength(ok.body));
    expect(JSON.parse(ok.body).fields.title.value).toBe('second');
  });

  test('a write is never taken: PUT goes through Hono', async () => {
    const before = viaHono.mock.calls.length;
    const body = JSON.stringify({ value: 'third', expected_version: 2 });
    const a = await raw(direct.url, '/v1/records/incident/r1/fields/title', [HOST, auth('alice'), ['Content-Type', 'application/json'], ['Content-Length', String(body.length)]], 'PUT', body);
    expect(viaHono.mock.calls.length).toBeGreaterThan(before);
    expect(a.status).toBe(200);
  });
});

test('a fault after the answer (here the access log throwing) is logged, and the gateway goes on answering', async () => {
  const errors: string[] = [];
  const log = {
    debug: () => undefined,
    info: (msg: string) => {
      if (msg === 'request') throw new Error('the log sink is gone');
    },
    warn: () => undefined,
    error: (msg: string) => void errors.push(msg),
  };
  const t = await startTestGateway([incident], { db: { ...direct.db, drop: async () => undefined }, log });
  try {
    for (let i = 0; i < 2; i++) {
      const before = viaHono.mock.calls.length;
      const a = await raw(t.url, '/v1/records/incident/r1', [HOST, auth('alice')]);
      expect(viaHono.mock.calls.length).toBe(before);
      expect(a.status).toBe(200);
      expect(JSON.parse(a.body).record).toBe('incident/r1');
    }
    expect(errors.filter((m) => /direct path failed/.test(m))).toHaveLength(2);
  } finally {
    await t.close();
  }
});
