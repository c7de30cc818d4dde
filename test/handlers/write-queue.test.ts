/**
 * The write batcher's queue is bounded (--write-queue-max; db/kysely/batch.ts,
 * docs/performance.md "Coalesced writes"): through a real gateway with one lane and a queue of
 * two, a write held on a record lock keeps the lane busy, two more writes wait, and every
 * further write answers 503 UNAVAILABLE with Retry-After and a message naming the flag, is not
 * applied, and is counted in svc_limit_refusals_total{limit="write_queue"}; once the lock goes,
 * the held and the queued writes apply.
 */
import pg from 'pg';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { incident } from '../fixtures/classes.js';
import { KEYS, startTestGateway, type TestGateway } from '../setup/gateway.js';
import { settled } from '../setup/wait.js';

let t: TestGateway;
let sql: pg.Client;

beforeAll(async () => {
  t = await startTestGateway([incident], { extraArgs: ['--write-batching', 'on', '--db-pool-size', '1', '--write-queue-max', '2'] });
  sql = new pg.Client({ connectionString: t.db.url });
  await sql.connect();
}, 60_000);

afterAll(async () => {
  await sql?.end();
  await t?.close();
});

const put = (rid: string, value: string, expected: number) =>
  fetch(`${t.url}/v1/records/incident/${rid}/fields/title`, {
    method: 'PUT',
    headers: { authorization: `Bearer ${KEYS.alice}`, 'content-type': 'application/json' },
    body: JSON.stringify({ value, expected_version: expected }),
  }).then(async (r) => ({ status: r.status, retryAfter: r.headers.get('retry-after'), body: await r.json() }));

async function refusals(): Promise<number> {
  const text = await (await fetch(`${t.gw.metricsUrl}/metrics`)).text();
  return Number(/^svc_limit_refusals_total\{limit="write_queue"\} (\S+)$/m.exec(text)?.[1] ?? 0);
}

test('past --write-queue-max a write answers 503 UNAVAILABLE with Retry-After, is not applied, and is counted', async () => {
  // The record exists, and the batcher knows the database is not Citus (it batches from then on):
  // its question went to the one pool connection ahead of this first write, so it was answered first.
  expect((await put('held', 'v1', 0)).status).toBe(201);
  const holder = new pg.Client({ connectionString: t.db.url });
  await holder.connect();
  try {
    await holder.query('begin');
    await holder.query(`select 1 from records where class = 'incident' and rid = 'held' for update`);
    // The gateway's one lane: a write waiting for that lock.
    const held = put('held', 'v2', 1);
    await settled(
      async () => (await sql.query(`select count(*)::int as n from pg_stat_activity where wait_event_type = 'Lock' and query like '%kslate_write%'`)).rows[0].n,
      (n) => n === 1,
    );
    const before = await refusals();
    // Ten more: two wait in the queue, the other eight are refused at once.
    const more = Array.from({ length: 10 }, (_, i) => put(`q-${i}`, `w${i}`, 0).then((r) => ({ i, ...r })));
    const refused: { i: number; status: number; retryAfter: string | null; body: any }[] = [];
    // Resolves when the eighth refusal arrives (the two queued writes answer only after the lock goes).
    await new Promise<void>((resolve, reject) => {
      for (const p of more)
        p.then((r) => {
          if (r.status === 503) refused.push(r);
          if (refused.length === 8) resolve();
        }, reject);
    });
    for (const r of refused) {
      expect(r.body.error).toBe('UNAVAILABLE');
      expect(r.retryAfter).toMatch(/^\d+$/);
      expect(r.body.message).toContain('--write-queue-max');
    }
    expect(await refusals()).toBe(before + 8);
    await holder.query('rollback');
    const all = await Promise.all(more);
    expect((await held).status).toBe(200);
    const ok = all.filter((r) => r.status !== 503);
    expect(ok.map((r) => r.status)).toEqual([201, 201]);
    // The refused writes were never sent: no record, no history row.
    const refusedRids = refused.map((r) => `q-${r.i}`);
    const { rows } = await sql.query(`select count(*)::int as n from history where class = 'incident' and rid = any($1)`, [refusedRids]);
    expect(rows[0].n).toBe(0);
  } finally {
    await holder.end();
  }
});
