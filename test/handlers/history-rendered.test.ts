/**
 * History rows stored rendered (db/migrations/0008_history_rendered.ts): every row's JSON is
 * written once, by a trigger, and a page is that text with the reader's premises and the time
 * added. These tests hold the stored text to the History row rule (interface.md "History
 * row"): whatever a writer stores, the page a reader gets is the row the rule describes.
 */
import fc from 'fast-check';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { incident } from '../fixtures/classes.js';
import { children, cleanEnv, ensureBuilt, start, stop } from '../setup/cli.js';
import { startTestGateway, type ClassInput, type TestGateway } from '../setup/gateway.js';
import { freePort } from '../setup/ports.js';

let t: TestGateway;
let client: pg.Client;

/** A class whose one role reads '*': its readers take the stored text as it is. */
const journal: ClassInput = {
  name: 'journal',
  spec: {
    fields: { title: { kind: 'versioned' }, status: { kind: 'versioned' }, severity: { kind: 'versioned' }, notes: { kind: 'versioned' }, secret: { kind: 'versioned' } },
    roles: { editor: { subjects: ['apikey:carol'], read: ['*'], write: ['*'] } },
  },
};

beforeAll(async () => {
  t = await startTestGateway([incident, journal]);
  client = new pg.Client({ connectionString: t.db.url });
  await client.connect();
});
afterAll(async () => {
  await client?.end();
  await t?.close();
});

const H = (id: string, q = '') => `/v1/records/incident/${id}/history${q}`;

/** What responder (alice) and reviewer (bob) may read in `incident`, and editor (carol) in `journal`. */
const READS: Record<string, Set<string>> = {
  alice: new Set(['title', 'status', 'severity', 'notes', 'triage', 'scratch', 'blob', 'proof', 'strong']),
  bob: new Set(['title', 'status', 'notes']),
  carol: new Set(['title', 'status', 'severity', 'notes', 'secret']),
};
const CLASS_OF: Record<string, string> = { alice: 'incident', bob: 'incident', carol: 'journal' };

interface Row {
  field: string;
  op: string;
  version: number | null;
  record_version: number | null;
  value: unknown;
  value_size: number | null;
  value_sha256: string | null;
  author: string;
  identity_strength: string | null;
  evidence: string | null;
  expected_version: number | null;
  based_on: { field: string; version: number }[] | null;
  invocation: Record<string, unknown> | null;
  outcome: string;
}

/** The History row rule, written out: the oracle the stored rendering is held to. */
function expected(seq: number, r: Row, reads: Set<string>): Record<string, unknown> {
  const out: Record<string, unknown> = { seq, field: r.field, op: r.op };
  if (r.version !== null) out.version = r.version;
  if (r.record_version !== null) out.record_version = r.record_version;
  if (r.value_sha256 !== null) {
    out.value_size = r.value_size;
    out.value_sha256 = r.value_sha256;
  } else if (r.value !== null) {
    out.value = r.value;
  }
  out.author = r.author;
  if (r.identity_strength !== null) out.identity_strength = r.identity_strength;
  if (r.evidence !== null) out.evidence = r.evidence;
  if (r.expected_version !== null) out.expected_version = r.expected_version;
  if (r.based_on !== null) {
    const seen = r.based_on.filter((p) => reads.has(p.field));
    if (r.based_on.length === 0) out.based_on = [];
    else if (seen.length > 0) out.based_on = seen;
  }
  if (r.invocation !== null) out.invocation = r.invocation;
  out.outcome = r.outcome;
  return out;
}

// Text PostgreSQL can store (no NUL), with quotes, backslashes, control characters, non-ASCII
// and astral characters: everything JSON escaping must get right.
const text = fc.string({ unit: fc.oneof(fc.constantFrom('"', '\\', '\n', '\t', '\u0001', '\u001f', '\u007f', '\u2028', 'é', '😀', '/'), fc.integer({ min: 1, max: 0x10ffff }).filter((c) => c < 0xd800 || c > 0xdfff).map((c) => String.fromCodePoint(c))) });
const json = fc.jsonValue({ maxDepth: 3 }).map((v) => JSON.parse(JSON.stringify(v, (_k, x) => (typeof x === 'string' ? x.replaceAll('\u0000', '') : x))));
const nullable = <T,>(a: fc.Arbitrary<T>) => fc.option(a, { nil: null });
const fieldName = fc.constantFrom('title', 'status', 'severity', 'notes', 'secret');
const count = fc.integer({ min: 0, max: 2 ** 40 });

// A value over 64 KiB is kept as its size and digest, always both (HistoryValue 'digest').
const digest = nullable(
  fc.record({
    value_size: fc.integer({ min: 0, max: 2 ** 30 }),
    value_sha256: fc.uint8Array({ minLength: 32, maxLength: 32 }).map((b) => Buffer.from(b).toString('hex')),
  }),
);

const row: fc.Arbitrary<Row> = fc.tuple(digest, fc.record({
  field: fieldName,
  op: fc.constantFrom('put', 'append', 'claim', 'release', 'takeover'),
  version: nullable(count),
  record_version: nullable(count),
  value: nullable(json.filter((v) => v !== null)),
  author: text,
  identity_strength: nullable(fc.constantFrom('shared-secret', 'sa-bound', 'pod-bound')),
  evidence: nullable(text),
  expected_version: nullable(count),
  based_on: nullable(fc.array(fc.record({ field: fieldName, version: count }), { maxLength: 3 })),
  invocation: nullable(fc.dictionary(fc.string({ maxLength: 8 }), json, { maxKeys: 3 })),
  outcome: fc.constantFrom('applied', 'stale', 'stale_premise', 'held', 'scope_denied'),
})).map(([d, r]) => ({ ...r, value_size: d?.value_size ?? null, value_sha256: d?.value_sha256 ?? null }));

/** Insert rows as any writer would (plain SQL; the trigger renders them), oldest first; their seqs. */
async function insert(rid: string, rows: Row[], cls = 'incident'): Promise<number[]> {
  const seqs: number[] = [];
  for (const r of rows) {
    const res = await client.query<{ id: string }>(
      `insert into history (class, rid, field, op, version, record_version, value, value_size, value_sha256, author,
                            identity_strength, evidence, expected_version, based_on, invocation, outcome)
       values ($16, $1, $2, $3, $4, $5, $6::json, $7, $8, $9, $10, $11, $12, $13::jsonb, $14::json, $15) returning id`,
      [
        rid, r.field, r.op, r.version, r.record_version, r.value === null ? null : JSON.stringify(r.value), r.value_size,
        r.value_sha256, r.author, r.identity_strength, r.evidence, r.expected_version,
        r.based_on === null ? null : JSON.stringify(r.based_on), r.invocation === null ? null : JSON.stringify(r.invocation), r.outcome, cls,
      ],
    );
    seqs.push(Number(res.rows[0].id));
  }
  return seqs;
}

/** The page as `who` reads it over HTTP, created_at checked and taken off. */
async function page(who: string, rid: string, cls = 'incident'): Promise<Record<string, unknown>[]> {
  const res = await t.call(who, 'GET', `/v1/records/${cls}/${rid}/history`);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.history.map((r: Record<string, unknown>) => {
    const { created_at, ...rest } = r;
    expect(created_at).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}[+-]\d{2}:\d{2}$/);
    return rest;
  });
}

let n = 0;

describe('history rows stored rendered', () => {
  test('any row any writer stores reads back as the History row rule describes it, for each reader', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(row, { minLength: 1, maxLength: 4 }), async (rows) => {
        const rid = `prop-${n++}`;
        const seqs = { incident: await insert(rid, rows), journal: await insert(rid, rows, 'journal') };
        for (const who of ['alice', 'bob', 'carol']) {
          const cls = CLASS_OF[who] as keyof typeof seqs;
          const reads = READS[who];
          const want = rows
            .map((r, i) => ({ r, seq: seqs[cls][i] }))
            .filter(({ r }) => reads.has(r.field))
            .map(({ r, seq }) => expected(seq, r, reads))
            .reverse();
          if (want.length === 0) continue; // an unreadable-only history is another test's matter
          expect(await page(who, rid, cls)).toEqual(want);
        }
      }),
      { numRuns: 150 },
    );
  });

  test('rows written before the column existed (rendered null) read the same as rows rendered when written', async () => {
    const rid = 'pre-0008';
    const put = (field: string, value: unknown, expected_version: number, extra: Record<string, unknown> = {}) =>
      t.call('alice', 'PUT', `/v1/records/incident/${rid}/fields/${field}`, { value, expected_version, ...extra });
    expect((await put('status', 'open', 0)).status).toBe(201);
    expect((await put('title', 'a "quoted" title\n', 0, { based_on: [{ field: 'status', version: 1 }] })).status).toBe(200);
    expect((await put('title', 'stale', 0)).status).toBe(409);
    const rendered = await t.call('alice', 'GET', H(rid));
    const stored = await client.query(`select count(*)::int as n from history where rid = $1 and rendered is not null`, [rid]);
    expect(stored.rows[0].n).toBe(3);

    await client.query(`update history set rendered = null where class = 'incident' and rid = $1`, [rid]);
    const late = await t.call('alice', 'GET', H(rid));
    expect(late.status).toBe(200);
    expect(late.body).toEqual(rendered.body);
    expect(late.body.history.map((r: { outcome: string }) => r.outcome)).toEqual(['stale', 'applied', 'applied']);
  });

  test('a page is the stored text: what the row was rendered to when written is what a reader gets', async () => {
    const rid = 'stored-text';
    const [seq] = await insert(rid, [
      { ...base, field: 'title', value: 'as written' },
    ]);
    // Change the stored rendering behind the gateway's back: the page follows it, so the read
    // did not render the columns again.
    await client.query(`update history set rendered = replace(rendered, 'as written', 'as stored') where id = $1`, [seq]);
    const rows = await page('alice', rid);
    expect(rows).toEqual([{ ...expected(seq, { ...base, field: 'title', value: 'as written' }, READS.alice), value: 'as stored' }]);
  });

  test('over HTTP the page is the stored text byte for byte', async () => {
    const rid = 'wire-text';
    await insert(rid, [{ ...base, field: 'title', value: { b: 1, a: [1.5, 'x'] }, evidence: 'see "this"' }]);
    const res = await fetch(`${t.url}${H(rid)}`, { headers: { authorization: 'Bearer alice-test-key' } });
    const body = await res.text();
    expect(res.headers.get('content-type')).toBe('application/json');
    const parsed = JSON.parse(body);
    expect(body).toBe(
      `{"record":"incident/${rid}","history":[{"seq":${parsed.history[0].seq},"field":"title","op":"put","value":{"b":1,"a":[1.5,"x"]},` +
        `"author":"apikey:alice","evidence":"see \\"this\\"","outcome":"applied","created_at":"${parsed.history[0].created_at}"}]}`,
    );
  });
});

describe('a gateway outside UTC', () => {
  test('writes every time in its own offset and still leaves out the premises a reader may not see', async () => {
    await ensureBuilt();
    // Written through the test's own gateway: the one started here loads examples/classes,
    // which leaves the fixture's journal class deleted (its records can still be read, by its
    // last roles: carol's reads '*').
    const put = await t.call('carol', 'PUT', '/v1/records/journal/kolkata-get/fields/title', { value: 'here', expected_version: 0 });
    expect(put.status, JSON.stringify(put.body)).toBe(201);
    const [port, metricsPort] = [await freePort(), await freePort()];
    // examples/classes: responder (alice) reads '*', reviewer (bob) not triage or scratch.
    const served = await start(
      [
        'serve',
        '--database-url', t.db.url,
        '--identity', 'apikey',
        '--apikeys', 'examples/apikeys.yaml',
        '--classes', 'examples/classes',
        '--listen', `127.0.0.1:${port}`,
        '--metrics-port', String(metricsPort),
      ],
      cleanEnv({ TZ: 'Asia/Kolkata' }),
    );
    try {
      // A get renders its times in the gateway's offset too, so it is not the rendering
      // PostgreSQL does in UTC for readers of every field (handlers/get.ts).
      const got = await fetch(`http://127.0.0.1:${port}/v1/records/journal/kolkata-get?fields=title,status`, {
        headers: { authorization: 'Bearer carol-dev-key' },
      });
      expect(got.status, await got.clone().text()).toBe(200);
      const title = ((await got.json()) as { fields: Record<string, { value: string; updated_at: string }> }).fields.title;
      expect(title.value).toBe('here');
      expect(title.updated_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+05:30$/);

      const rid = 'kolkata';
      const premises = [{ field: 'scratch', version: 2 }, { field: 'title', version: 1 }];
      await insert(rid, [{ ...base, field: 'title', value: 'x' }, { ...base, field: 'status', value: 'open', based_on: premises }]);
      await insert(rid, [{ ...base, field: 'status', value: 'investigating', based_on: [{ field: 'scratch', version: 3 }] }]);
      const times = await client.query<{ ms: string }>(
        `select floor(extract(epoch from created_at) * 1000)::bigint as ms from history where class = 'incident' and rid = $1 order by id desc`,
        [rid],
      );
      const read = async (who: string) => {
        const res = await fetch(`http://127.0.0.1:${port}/v1/records/incident/${rid}/history`, { headers: { authorization: `Bearer ${who}-dev-key` } });
        expect(res.status).toBe(200);
        return ((await res.json()) as { history: Record<string, unknown>[] }).history;
      };
      for (const who of ['alice', 'bob']) {
        const rows = await read(who);
        expect(rows.map((r) => r.created_at)).toEqual(rows.map((r) => expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+05:30$/)));
        expect(rows.map((r) => Date.parse(r.created_at as string))).toEqual(times.rows.map((r) => Number(r.ms)));
        expect(rows.map((r) => r.value)).toEqual(['investigating', 'open', 'x']);
        if (who === 'alice') expect(rows.map((r) => r.based_on)).toEqual([[{ field: 'scratch', version: 3 }], premises, undefined]);
        // bob may not read scratch: a list left empty goes, the rest keeps its readable premises.
        else expect(rows.map((r) => r.based_on)).toEqual([undefined, [{ field: 'title', version: 1 }], undefined]);
      }
    } finally {
      await stop(served.child);
    }
  }, 90_000);
});

afterAll(async () => {
  await Promise.all([...children].map((c) => stop(c).catch(() => undefined)));
});

const base: Row = {
  field: 'title',
  op: 'put',
  version: null,
  record_version: null,
  value: null,
  value_size: null,
  value_sha256: null,
  author: 'apikey:alice',
  identity_strength: null,
  evidence: null,
  expected_version: null,
  based_on: null,
  invocation: null,
  outcome: 'applied',
};
