/**
 * A record's own expiry (ttl_seconds, issue 37) racing writes: the sweep's expiry deletes a due
 * record in one statement under the record's lock and a write takes the same lock, so a write
 * concurrent with the expiry either lands on the live record (its old fields still there, its
 * record_version one more, its expiry extended) or creates a new record (record_version 1,
 * only what it wrote, no history of the old life). Never a half state: no reader, during the
 * race or after, sees a record mixing old and new lives, or a record without its fields.
 * Real gateway, real PostgreSQL, real sweeps running while the writes and reads do.
 */
import pg from 'pg';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { createPool, PgDb } from '../../db/kysely/index.js';
import { sweep } from '../../worker/sweep.js';
import { quietLog, startTestGateway, type TestGateway } from '../setup/gateway.js';

const roles = { crew: { subjects: ['apikey:alice'], read: ['*'], write: ['*'] } };
const N = 40;
let t: TestGateway;
let sql: pg.Client;
let db: PgDb;

beforeAll(async () => {
  t = await startTestGateway([{ name: 'scratch', namespace: 'team-a', spec: { fields: { a: { kind: 'soft' }, b: { kind: 'soft' } }, roles } }]);
  sql = new pg.Client({ connectionString: t.db.url });
  await sql.connect();
  db = new PgDb(createPool({ connectionString: t.db.url, max: 4, timeoutMs: 60_000 }));
}, 120_000);
afterAll(async () => {
  await sql?.end();
  await db?.kysely.destroy();
  await t?.close();
});

/** What a reader may see of record `id`: nothing (404), the old life (b old), or the new one (record_version 1, a new, no b). */
function judge(id: string, status: number, body: any): string | null {
  if (status === 404) return null;
  if (status !== 200) return `${id}: status ${status}`;
  const f = body.fields ?? {};
  const a = f.a?.value;
  const b = f.b?.value;
  if (b === 'old') {
    if (a === 'old' && body.record_version === 2) return null; // before the write
    if (a === 'new' && body.record_version === 3) return null; // the write landed on the live record
    return `${id}: old life with a=${JSON.stringify(a)} at record_version ${body.record_version}`;
  }
  if (b === undefined && a === 'new' && body.record_version === 1) return null; // a new record
  return `${id}: half state ${JSON.stringify(body)}`;
}

test('a write racing its record expiry lands on the live record or creates a new one, never a half state', async () => {
  for (let i = 0; i < N; i++) {
    for (const field of ['a', 'b']) {
      const r = await t.call('alice', 'PUT', `/v1/records/scratch/x${i}/fields/${field}`, { value: 'old', ttl_seconds: 60 });
      expect(r.status).toBeLessThan(300);
    }
  }
  await sql.query(`update records set expires_at = now() - interval '1 second' where class = 'scratch'`);

  const bad: string[] = [];
  let racing = true;
  // Readers: every record, over and over, while the race runs.
  const readers = Array.from({ length: 4 }, async (_, k) => {
    for (let n = 0; racing || n === 0; n++) {
      for (let i = k; i < N; i += 4) {
        const r = await t.call('alice', 'GET', `/v1/records/scratch/x${i}`);
        const why = judge(`x${i}`, r.status, r.body);
        if (why) bad.push(`reader: ${why}`);
      }
    }
  });
  // The sweep's expiry, a few batches of a few records, against one write per record.
  const sweeps = (async () => {
    const expired: number[] = [];
    for (let s = 0; s < 3; s++) {
      const rep = await sweep({ db, log: quietLog, holder: `test/ttl-race/${s}` }, { steps: ['expire'] });
      expect(rep.ok, JSON.stringify(rep.errors)).toBe(true);
      expired.push(rep.expired!.records);
    }
    return expired;
  })();
  const writes = Promise.all(
    Array.from({ length: N }, (_, i) => t.call('alice', 'PUT', `/v1/records/scratch/x${i}/fields/a`, { value: 'new', ttl_seconds: 3600 })),
  );
  const [written] = await Promise.all([writes, sweeps]);
  racing = false;
  await Promise.all(readers);
  for (const w of written) expect(w.status, JSON.stringify(w.body)).toBeLessThan(300);

  // After the race (and one more sweep): every record lives — the write either extended the
  // old one's expiry or gave the new one its own — in exactly one of the two whole states.
  await sweep({ db, log: quietLog, holder: 'test/ttl-race/after' }, { steps: ['expire'] });
  let landed = 0;
  let recreated = 0;
  for (let i = 0; i < N; i++) {
    const r = await t.call('alice', 'GET', `/v1/records/scratch/x${i}`);
    expect(r.status).toBe(200);
    const why = judge(`x${i}`, r.status, r.body);
    if (why) bad.push(`after: ${why}`);
    expect(r.body.fields.a.value).toBe('new');
    expect(Date.parse(r.body.expires_at)).toBeGreaterThan(Date.now() + 3000_000);
    const h = await t.call('alice', 'GET', `/v1/records/scratch/x${i}/history`);
    if (r.body.record_version === 1) {
      recreated++;
      // Nothing of the old life in the new record's history.
      expect(h.body.history.map((x: any) => x.value)).toEqual(['new']);
    } else {
      landed++;
      expect(h.body.history.map((x: any) => x.value).sort()).toEqual(['new', 'old', 'old']);
    }
    // The write's answer agrees with what the record is.
    expect(written[i].body.record_version).toBe(r.body.record_version);
    expect(written[i].status).toBe(r.body.record_version === 1 ? 201 : 200);
  }
  expect(bad).toEqual([]);
  expect(landed + recreated).toBe(N);
}, 120_000);
