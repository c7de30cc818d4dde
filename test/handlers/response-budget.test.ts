/**
 * Every read response is bounded by bytes as well as rows (issue 10, defects 1 and 7): a
 * history page of 140 rejected 3.9 MiB puts was one 546 MiB text, past what the driver can
 * hold, and the process died on every retry; a record with many large entries answered GET
 * with 500. A page now stops at MAX_RESPONSE_BYTES (16 MiB) with its continuation; a single
 * row larger than the budget still comes alone. The same handler answers MCP and gRPC.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PgDb, createPool } from '../../db/kysely/index.js';
import { MAX_RESPONSE_BYTES, MIB } from '../../handlers/format.js';
import type { ClassInput } from '../setup/gateway.js';
import { startTestGateway, type TestGateway } from '../setup/gateway.js';
import { freePort } from '../setup/ports.js';
import { grpcAdapter, httpAdapter, mcpAdapter, type Adapter } from '../transports/clients.js';

const big: ClassInput = {
  name: 'bulky',
  spec: {
    fields: {
      a: { kind: 'soft' },
      b: { kind: 'soft' },
      c: { kind: 'soft' },
      d: { kind: 'soft' },
      e: { kind: 'soft' },
      doc: { kind: 'versioned' },
      log: { kind: 'append' },
      tag: { kind: 'versioned', type: 'string' },
    },
    roles: { owner: { subjects: ['apikey:alice'], read: ['*'], write: ['*'] } },
  },
};

/** A value whose put body stays just under the 4 MiB body limit. */
const LARGE = 3.9 * MIB;
const large = (c: string) => c.repeat(LARGE);

let t: TestGateway;
let adapters: Adapter[];

beforeAll(async () => {
  t = await startTestGateway([big], { extraArgs: ['--grpc-port', String(await freePort())] });
  adapters = [httpAdapter(t.url), mcpAdapter(t.url), grpcAdapter(`127.0.0.1:${t.gw.grpcPort}`)];
}, 120_000);

afterAll(async () => {
  for (const a of adapters ?? []) await a.close();
  await t?.close();
});

const bytesOf = (body: unknown) => Buffer.byteLength(JSON.stringify(body));

async function ok(who: string, method: string, path: string, body?: unknown) {
  const r = await t.call(who, method, path, body);
  expect(r.status, JSON.stringify(r.body).slice(0, 300)).toBeLessThan(300);
  return r.body;
}

describe('history', () => {
  it('10 rejected 3.9 MiB puts: pages stop at 16 MiB with next_before, and the cursor walks every row once', async () => {
    await ok('alice', 'PUT', '/v1/records/bulky/h1/fields/doc', { value: 'v1', expected_version: 0 });
    for (let i = 0; i < 10; i++) {
      // STALE rows keep the whole value (interface: History row).
      const r = await t.call('alice', 'PUT', '/v1/records/bulky/h1/fields/doc', { value: large(String(i)), expected_version: 0 });
      expect(r.status).toBe(409);
    }
    const seqs: number[] = [];
    let before: string | undefined;
    let pages = 0;
    do {
      const page = await ok('alice', 'GET', `/v1/records/bulky/h1/history${before ? `?before=${encodeURIComponent(before)}` : ''}`);
      pages++;
      expect(page.history.length).toBeGreaterThan(0);
      expect(bytesOf(page)).toBeLessThanOrEqual(MAX_RESPONSE_BYTES + 4 * MIB);
      seqs.push(...page.history.map((h: { seq: number }) => h.seq));
      before = page.next_before;
    } while (before);
    expect(seqs).toHaveLength(11);
    expect(new Set(seqs).size).toBe(11);
    expect([...seqs].sort((x, y) => y - x)).toEqual(seqs);
    // 39 MiB of rows cannot come in fewer than three pages of at most 16 MiB.
    expect(pages).toBeGreaterThanOrEqual(3);
  });

  it('a row larger than the budget comes alone, and the page still advances (database port)', async () => {
    const pool = createPool({ connectionString: t.db.url, max: 1 });
    const db = new PgDb(pool);
    try {
      const first = await db.readHistory('bulky', 'h1', { fields: null, beforeSeq: null, limit: 100, maxBytes: 1000, mark: 'none' });
      expect(first.count).toBe(1);
      expect(JSON.parse(`[${first.runs.join(',')}]`)).toHaveLength(1);
      expect(first.more).toBe(true);
      const next = await db.readHistory('bulky', 'h1', { fields: null, beforeSeq: first.lastSeq, limit: 100, maxBytes: 1000, mark: 'none' });
      expect(next.count).toBe(1);
      expect(next.lastSeq).toBeLessThan(first.lastSeq!);
    } finally {
      await db.kysely.destroy();
    }
  });
});

describe('get', () => {
  it('six 3.9 MiB entries: the newest that fit, next_entries_before, then the rest — on HTTP, MCP and gRPC alike', async () => {
    for (let i = 0; i < 6; i++) {
      await ok('alice', 'POST', '/v1/records/bulky/g1/fields/log/entries', { entry: large(String(i)), evidence: 'e' });
    }
    const answers = [];
    for (const a of adapters) {
      const first = await a.run('alice', 'get', { record: 'bulky/g1' });
      expect(first.code, a.name).toBe('OK');
      const log = (first.body as any).fields.log;
      expect(log.version).toBe(6);
      expect(log.entries.length).toBeGreaterThan(0);
      expect(log.entries.length).toBeLessThan(6);
      // The newest ones, oldest first, ending with seq 6.
      expect(log.entries.at(-1).seq).toBe(6);
      expect(typeof log.next_entries_before).toBe('string');
      expect(bytesOf(first.body)).toBeLessThanOrEqual(MAX_RESPONSE_BYTES + 4 * MIB);

      const seen: number[] = log.entries.map((e: { seq: number }) => e.seq);
      let cursor: string | undefined = log.next_entries_before;
      while (cursor) {
        const more = await a.run('alice', 'get', { record: 'bulky/g1', fields: ['log'], entries_before: cursor });
        expect(more.code, a.name).toBe('OK');
        const f = (more.body as any).fields.log;
        expect(f.entries.length).toBeGreaterThan(0);
        seen.unshift(...f.entries.map((e: { seq: number }) => e.seq));
        cursor = f.next_entries_before;
      }
      expect(seen, a.name).toEqual([1, 2, 3, 4, 5, 6]);
      answers.push(log.entries.length);
    }
    expect(new Set(answers).size).toBe(1);
  }, 120_000); // 36 MiB written and read back over three transports: over 30 s at load 7 on 2 cores

  it('entries_limit still caps the count, and no cursor is given when the limit, not the budget, stopped the read', async () => {
    const r = await ok('alice', 'GET', '/v1/records/bulky/g1?entries_limit=2');
    expect(r.fields.log.entries.map((e: { seq: number }) => e.seq)).toEqual([5, 6]);
    expect(r.fields.log.next_entries_before).toBeUndefined();
  });

  it('entries_before needs fields naming that one append field, and a cursor this service issued', async () => {
    const first = await ok('alice', 'GET', '/v1/records/bulky/g1');
    const cursor = first.fields.log.next_entries_before;
    const without = await t.call('alice', 'GET', `/v1/records/bulky/g1?entries_before=${encodeURIComponent(cursor)}`);
    expect(without.status).toBe(400);
    expect(without.body).toMatchObject({ error: 'MALFORMED' });
    expect(without.body.message).toMatch(/fields=/);
    const forged = await t.call('alice', 'GET', `/v1/records/bulky/g1?fields=log&entries_before=AAAA.BBBB`);
    expect(forged.status).toBe(400);
    expect(forged.body.message).toMatch(/entries_before/);
    // A cursor for another record is refused too.
    const other = await t.call('alice', 'GET', `/v1/records/bulky/h1?fields=log&entries_before=${encodeURIComponent(cursor)}`);
    expect(other.status).toBe(400);
  });

  it('five 3.9 MiB fields: those past the budget are named in omitted_fields and read on their own', async () => {
    for (const f of ['a', 'b', 'c', 'd', 'e']) {
      await ok('alice', 'PUT', `/v1/records/bulky/f1/fields/${f}`, { value: large(f) });
    }
    await ok('alice', 'PUT', '/v1/records/bulky/f1/fields/tag', { value: 'small', expected_version: 0 });
    const r = await ok('alice', 'GET', '/v1/records/bulky/f1');
    expect(bytesOf(r)).toBeLessThanOrEqual(MAX_RESPONSE_BYTES + 4 * MIB);
    expect(r.omitted_fields.length).toBeGreaterThan(0);
    const shown = Object.keys(r.fields);
    expect([...shown, ...r.omitted_fields].sort()).toEqual(['a', 'b', 'c', 'd', 'e', 'tag']);
    for (const name of r.omitted_fields) {
      const one = await ok('alice', 'GET', `/v1/records/bulky/f1?fields=${name}`);
      expect(one.omitted_fields).toBeUndefined();
      expect(one.fields[name].value).toBe(name === 'tag' ? 'small' : large(name));
    }
  });
});

describe('query', () => {
  it('six records of 3.9 MiB: pages stop at 16 MiB with next_after, and the cursor visits each record once', async () => {
    for (let i = 0; i < 6; i++) {
      await ok('alice', 'PUT', `/v1/records/bulky/q${i}/fields/tag`, { value: 'q', expected_version: 0 });
      await ok('alice', 'PUT', `/v1/records/bulky/q${i}/fields/doc`, { value: large('q'), expected_version: 0 });
    }
    const seen: string[] = [];
    let after: string | undefined;
    let pages = 0;
    do {
      const page = await ok('alice', 'GET', `/v1/records/bulky?tag=q${after ? `&after=${encodeURIComponent(after)}` : ''}`);
      pages++;
      expect(page.records.length).toBeGreaterThan(0);
      expect(bytesOf(page)).toBeLessThanOrEqual(MAX_RESPONSE_BYTES + 4 * MIB);
      seen.push(...page.records.map((r: { record: string }) => r.record));
      after = page.next_after;
    } while (after);
    expect(seen).toEqual([0, 1, 2, 3, 4, 5].map((i) => `bulky/q${i}`));
    expect(pages).toBeGreaterThanOrEqual(2);
  });
});

describe('query with large latest entries', () => {
  it('six records whose latest entry is 3.9 MiB: pages stop at 16 MiB, each record once', async () => {
    for (let i = 0; i < 6; i++) {
      await ok('alice', 'PUT', `/v1/records/bulky/e${i}/fields/tag`, { value: 'e', expected_version: 0 });
      await ok('alice', 'POST', `/v1/records/bulky/e${i}/fields/log/entries`, { entry: large('e'), evidence: 'x' });
    }
    const seen: string[] = [];
    let after: string | undefined;
    do {
      const page = await ok('alice', 'GET', `/v1/records/bulky?tag=e${after ? `&after=${encodeURIComponent(after)}` : ''}`);
      expect(page.records.length).toBeGreaterThan(0);
      expect(bytesOf(page)).toBeLessThanOrEqual(MAX_RESPONSE_BYTES + 4 * MIB);
      for (const r of page.records) expect(r.fields.log.entries[0].value).toBe(large('e'));
      seen.push(...page.records.map((r: { record: string }) => r.record));
      after = page.next_after;
    } while (after);
    expect(seen).toEqual([0, 1, 2, 3, 4, 5].map((i) => `bulky/e${i}`));
  });
});
