/**
 * One write shows one time everywhere (issue 32 item 5): history's `created_at` and get's
 * `updated_at` are the same millisecond, TRUNCATED (RFC 3339 practice; db/migrations/0025).
 * Before 0025 a history row ROUNDED it: a write at .5259 ms past a millisecond showed as .526
 * in history and .525 in get.
 */
import pg from 'pg';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { startTestGateway, type ClassInput, type TestGateway } from '../setup/gateway.js';

const cls: ClassInput = {
  name: 'clock',
  spec: { fields: { v: { kind: 'versioned' } }, roles: { w: { subjects: ['apikey:alice'], read: ['*'], write: ['*'] } } },
};

let t: TestGateway;
let client: pg.Client;
beforeAll(async () => {
  t = await startTestGateway([cls]);
  client = new pg.Client({ connectionString: t.db.url });
  await client.connect();
}, 120_000);
afterAll(async () => {
  await client?.end();
  await t?.close();
});

async function put(rid: string, version: number): Promise<void> {
  const res = await t.call('alice', 'PUT', `/v1/records/clock/${rid}/fields/v`, { value: version, expected_version: version });
  expect(res.status, JSON.stringify(res.body)).toBeLessThan(300);
}

async function times(rid: string): Promise<{ get: string; history: string }> {
  const got = await t.call('alice', 'GET', `/v1/records/clock/${rid}`);
  const hist = await t.call('alice', 'GET', `/v1/records/clock/${rid}/history`);
  expect(got.status).toBe(200);
  expect(hist.status).toBe(200);
  const newest = hist.body.history.reduce((a: { seq: number }, b: { seq: number }) => (b.seq > a.seq ? b : a));
  return { get: got.body.fields.v.updated_at, history: newest.created_at };
}

test('a row rendered at read time shows a write at .5259 ms past a millisecond as .525, as get does', async () => {
  await put('known', 0);
  // The same known instant on the field and its history row; the row's stored text is dropped,
  // so the page renders it with kslate_history_render_row (the function the insert trigger uses).
  const at = '2026-11-27 04:00:00.5259+00';
  await client.query(`update fields set updated_at = $2 where rid = $1`, ['known', at]);
  await client.query(`update history set created_at = $2, rendered = null where rid = $1`, ['known', at]);
  const { get, history } = await times('known');
  expect(get).toMatch(/T04:00:00\.525[+-]/);
  expect(history).toBe(get);
});

test('the insert trigger stores the same millisecond get shows, for a write in the upper half of a millisecond', async () => {
  // Write until one lands at >= .5 ms past its millisecond (each does with probability 1/2),
  // where rounding and truncating differ; then get and history must agree to the byte.
  let version = 0;
  for (;;) {
    await put('live', version++);
    const { rows } = await client.query<{ us: number }>(
      `select (extract(microseconds from created_at)::bigint % 1000)::int as us from history where rid = 'live' order by id desc limit 1`,
    );
    if (rows[0].us >= 500) break;
    expect(version, 'no write in 40 landed in the upper half of a millisecond').toBeLessThan(40);
  }
  const { get, history } = await times('live');
  expect(history).toBe(get);
});
