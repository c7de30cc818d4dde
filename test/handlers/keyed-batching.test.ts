/**
 * Keyed writes coalesced into write batches, end to end (issue 38 item 1; docs/performance.md
 * "Coalesced writes", docs/decisions.md "Keyed writes in a batch"): through a real gateway
 * with one lane and a queue of four, a write held on a record lock keeps the lane busy while
 * six concurrent requests with one Idempotency-Key arrive; four wait in the queue (the other
 * two are refused, which tells the test the queue is full), and once the lock goes the four
 * go as one batch statement (svc_write_batch_size) and answer as they would one after the
 * other: the first applies and the other three replay its answer byte for byte; with a key
 * that holds another request's answer all four are IDEMPOTENCY_KEY_REUSED; with a key another
 * transaction holds all four are IDEMPOTENCY_KEY_IN_USE with Retry-After.
 */
import pg from 'pg';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { incident } from '../fixtures/classes.js';
import { KEYS, startTestGateway, type TestGateway } from '../setup/gateway.js';
import { settled } from '../setup/wait.js';

let t: TestGateway;
let sql: pg.Client;

beforeAll(async () => {
  t = await startTestGateway([incident], { extraArgs: ['--write-batching', 'on', '--db-pool-size', '1', '--write-queue-max', '4'] });
  sql = new pg.Client({ connectionString: t.db.url });
  await sql.connect();
  // The held record exists, and the batcher knows the database is not Citus (it batches from then on).
  expect((await put('held', 'v0', 0)).status).toBe(201);
}, 60_000);

afterAll(async () => {
  await sql?.end();
  await t?.close();
});

interface Answer {
  status: number;
  text: string;
  body: any;
  replayed: boolean;
  retryAfter: string | null;
}

let heldVersion = 1;

function put(rid: string, value: string, expected: number, key?: string): Promise<Answer> {
  const headers: Record<string, string> = { authorization: `Bearer ${KEYS.alice}`, 'content-type': 'application/json' };
  if (key !== undefined) headers['idempotency-key'] = key;
  return fetch(`${t.url}/v1/records/incident/${rid}/fields/title`, { method: 'PUT', headers, body: JSON.stringify({ value, expected_version: expected }) }).then(
    async (r) => {
      const text = await r.text();
      return { status: r.status, text, body: JSON.parse(text), replayed: r.headers.get('idempotent-replayed') === 'true', retryAfter: r.headers.get('retry-after') };
    },
  );
}

/** svc_write_batch_size's count and sum. */
async function batchSizes(): Promise<{ count: number; sum: number }> {
  const text = await (await fetch(`${t.gw.metricsUrl}/metrics`)).text();
  const num = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? 0);
  return { count: num('svc_write_batch_size_count'), sum: num('svc_write_batch_size_sum') };
}

/**
 * Six identical keyed puts sent while the one lane is held; resolves with the four that were
 * queued (the two refused for the full queue left out), answered after their batch.
 */
async function sixInOneBatch(rid: string, value: string, expected: number, key: string): Promise<Answer[]> {
  const holder = new pg.Client({ connectionString: t.db.url });
  await holder.connect();
  try {
    await holder.query('begin');
    await holder.query(`select 1 from records where class = 'incident' and rid = 'held' for update`);
    const before = await batchSizes();
    // The gateway's one lane: a write waiting for that lock.
    const held = put('held', `v${heldVersion}`, heldVersion);
    heldVersion++;
    await settled(
      async () => (await sql.query(`select count(*)::int as n from pg_stat_activity where wait_event_type = 'Lock' and query like '%kslate_write%'`)).rows[0].n,
      (n) => n === 1,
    );
    const six = Array.from({ length: 6 }, () => put(rid, value, expected, key));
    // Two are refused at once (503, nothing sent): the other four are in the queue.
    let refused = 0;
    await new Promise<void>((resolve, reject) => {
      for (const p of six)
        p.then((r) => {
          if (r.status === 503) refused++;
          if (refused === 2) resolve();
        }, reject);
    });
    await holder.query('commit');
    expect((await held).status).toBe(200);
    const all = await Promise.all(six);
    const queued = all.filter((r) => r.status !== 503);
    expect(queued).toHaveLength(4);
    // The held write alone, then the four in one statement.
    const after = await batchSizes();
    expect({ count: after.count - before.count, sum: after.sum - before.sum }).toEqual({ count: 2, sum: 5 });
    return queued;
  } finally {
    await holder.end();
  }
}

test('four requests with one new key in one batch: the first applies, the other three replay its answer', async () => {
  const answers = await sixInOneBatch('fresh', 'f1', 0, 'key-fresh');
  expect(answers.map((a) => a.status)).toEqual([201, 201, 201, 201]);
  expect(answers.filter((a) => !a.replayed)).toHaveLength(1);
  for (const a of answers) expect(a.text).toBe(answers[0].text);
  expect(answers[0].body).toMatchObject({ version: 1 });
  const h = await sql.query(`select outcome, version::int from history where class = 'incident' and rid = 'fresh'`);
  expect(h.rows).toEqual([{ outcome: 'applied', version: 1 }]);
  // Kept with the write: a later retry replays the same answer.
  const late = await put('fresh', 'f1', 0, 'key-fresh');
  expect([late.status, late.replayed, late.text]).toEqual([201, true, answers[0].text]);
});

test('a key that holds another request\'s answer: all four in the batch are IDEMPOTENCY_KEY_REUSED and write nothing', async () => {
  expect((await put('reused', 'r1', 0, 'key-reused')).status).toBe(201);
  const answers = await sixInOneBatch('reused', 'r2', 1, 'key-reused');
  for (const a of answers) expect([a.status, a.body.error, a.replayed]).toEqual([422, 'IDEMPOTENCY_KEY_REUSED', false]);
  const h = await sql.query(`select outcome, version::int from history where class = 'incident' and rid = 'reused'`);
  expect(h.rows).toEqual([{ outcome: 'applied', version: 1 }]);
});

test('a key another transaction holds: all four in the batch are IDEMPOTENCY_KEY_IN_USE with Retry-After and write nothing', async () => {
  const locker = new pg.Client({ connectionString: t.db.url });
  await locker.connect();
  try {
    await locker.query(`select pg_advisory_lock(hashtextextended('apikey:alice' || chr(10) || 'key-busy', 11))`);
    const answers = await sixInOneBatch('busy', 'b1', 0, 'key-busy');
    for (const a of answers) expect([a.status, a.body.error, a.retryAfter]).toEqual([409, 'IDEMPOTENCY_KEY_IN_USE', '1']);
  } finally {
    await locker.end();
  }
  const h = await sql.query(`select count(*)::int as n from history where class = 'incident' and rid = 'busy'`);
  expect(h.rows[0].n).toBe(0);
  // Once the other transaction let go, the key is free: the write applies.
  const after = await put('busy', 'b1', 0, 'key-busy');
  expect([after.status, after.replayed]).toEqual([201, false]);
});
