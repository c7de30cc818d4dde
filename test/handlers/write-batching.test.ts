/**
 * Coalesced writes end to end (issue 38 item 1; docs/performance.md "Coalesced writes"): 64
 * writers on 8 hot records and 64 on records of their own, over real sockets, against a
 * gateway with --write-batching on and one with it off. Both give histories that obey the
 * same rules: every attempt has its history row, each record's applied versions are
 * contiguous in history order, no update is lost, each STALE names the version and value that
 * were current when it was decided, and uncontended records have the same history either
 * way. The gateway with batching on did batch (svc_write_batch_size), the other did not.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { incident } from '../fixtures/classes.js';
import { startTestGateway, type TestGateway } from '../setup/gateway.js';
import { CITUS } from '../setup/citus.js';

const HOT = 8;
const HOT_WRITERS = 64;
const COLD_WRITERS = 64;
const ATTEMPTS = 4;

interface Attempt {
  rid: string;
  value: string;
  expected: number;
  status: number;
  body: any;
}

interface Run {
  t: TestGateway;
  sql: pg.Client;
  attempts: Attempt[];
}

const runs: Record<'on' | 'off', Run> = {} as never;

/**
 * On Citus (vitest.citus.config.ts) the gateway sends every write as its own statement whatever
 * --write-batching says (a batch would span shards: docs/scale-out.md), so there the same
 * history rules are checked with every write alone, and the pool is not held to 2 (it only
 * made the batcher's lanes busy; through the coordinator 128 writers queued on 2 connections
 * past the pool's wait and were answered 503).
 */

async function start(mode: 'on' | 'off'): Promise<Run> {
  // A pool of 2: writes queue once two are in flight (the batcher's lanes are the pool's
  // connections), which this file's writers, sharing the process with the gateway, reach.
  const t = await startTestGateway([incident], { extraArgs: ['--write-batching', mode, '--db-pool-size', CITUS ? '8' : '2'] });
  const sql = new pg.Client({ connectionString: t.db.url });
  await sql.connect();
  return { t, sql, attempts: [] };
}

/** One writer: ATTEMPTS puts on `rid`, each expecting the version its last answer told it. */
async function writer(r: Run, rid: string, name: string): Promise<void> {
  let expected = 0;
  for (let k = 0; k < ATTEMPTS; k++) {
    const value = `${name}-${k}`;
    const res = await r.t.call('alice', 'PUT', `/v1/records/incident/${rid}/fields/title`, { value, expected_version: expected });
    r.attempts.push({ rid, value, expected, status: res.status, body: res.body });
    if (res.status === 200 || res.status === 201) expected = res.body.version;
    else if (res.status === 409 && res.body?.error === 'STALE') expected = res.body.current_version;
    else throw new Error(`unexpected answer ${res.status} ${JSON.stringify(res.body)}`);
  }
}

async function load(r: Run): Promise<void> {
  await Promise.all([
    ...Array.from({ length: HOT_WRITERS }, (_, i) => writer(r, `hot-${i % HOT}`, `h${i}`)),
    ...Array.from({ length: COLD_WRITERS }, (_, i) => writer(r, `cold-${i}`, `c${i}`)),
  ]);
}

/** svc_write_batch_size's count and sum on the gateway's metrics port. */
async function batchSizes(r: Run): Promise<{ count: number; sum: number }> {
  const text = await (await fetch(`${r.t.gw.metricsUrl}/metrics`)).text();
  const num = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? 0);
  return { count: num('svc_write_batch_size_count'), sum: num('svc_write_batch_size_sum') };
}

interface Row {
  /** Text: on Citus ids come from per-node sequences, past the int range. */
  id: string;
  rid: string;
  outcome: string;
  version: number | null;
  record_version: number | null;
  value: string;
  expected_version: number;
}

async function historyOf(r: Run): Promise<Row[]> {
  const { rows } = await r.sql.query<Row>(
    `select id::text as id, rid, outcome, version::int, record_version::int, value #>> '{}' as value, expected_version::int
       from history h where class = 'incident' and field = 'title' order by h.id`,
  );
  return rows;
}

/** The rules every run must obey, batched or not. */
async function checkRules(r: Run): Promise<Row[]> {
  const rows = await historyOf(r);
  expect(r.attempts).toHaveLength((HOT_WRITERS + COLD_WRITERS) * ATTEMPTS);
  // Every attempt has exactly one history row (values are unique per attempt), with its outcome.
  expect(rows).toHaveLength(r.attempts.length);
  const rowOf = new Map(rows.map((h) => [h.value, h]));
  expect(rowOf.size).toBe(rows.length);
  for (const a of r.attempts) {
    const h = rowOf.get(a.value)!;
    expect(h, a.value).toBeDefined();
    expect(h.rid).toBe(a.rid);
    expect(h.expected_version).toBe(a.expected);
    if (a.status === 409) {
      expect(h.outcome).toBe('stale');
      expect(a.body.your_version).toBe(a.expected);
    } else {
      expect(h.outcome).toBe('applied');
      expect(a.body.version).toBe(h.version);
      expect(a.body.record_version).toBe(h.record_version);
      expect(a.status).toBe(a.expected === 0 ? 201 : 200);
    }
  }
  const rids = [...new Set(r.attempts.map((a) => a.rid))];
  for (const rid of rids) {
    const mine = rows.filter((h) => h.rid === rid);
    // Applied versions are 1, 2, 3, ... in history order: no lost update, no gap, no reorder.
    const applied = mine.filter((h) => h.outcome === 'applied');
    expect(applied.map((h) => h.version)).toEqual(applied.map((_, i) => i + 1));
    expect(applied.map((h) => h.record_version)).toEqual(applied.map((_, i) => i + 1));
    // Each applied write expected the version before it; each STALE saw the version then current.
    let current = 0;
    let currentValue: string | null = null;
    for (const h of mine) {
      if (h.outcome === 'applied') {
        expect(h.expected_version).toBe(current);
        current = h.version!;
        currentValue = h.value;
      } else {
        expect(h.expected_version).not.toBe(current);
        const a = r.attempts.find((x) => x.value === h.value)!;
        expect(a.body).toMatchObject({ error: 'STALE', current_version: current, current_value: currentValue });
      }
    }
    // The record holds the last applied write.
    const g = await r.t.call('alice', 'GET', `/v1/records/incident/${rid}`);
    expect(g.body.fields.title).toMatchObject({ value: currentValue, version: current });
  }
  return rows;
}

describe.each(['on', 'off'] as const)('--write-batching %s', (mode) => {
  beforeAll(async () => {
    runs[mode] = await start(mode);
    await load(runs[mode]);
  }, 120_000);

  test('every attempt has its history row; versions contiguous; no lost update; each STALE correct', async () => {
    await checkRules(runs[mode]);
  });

  test(mode === 'on' && !CITUS ? 'writes were coalesced into batches' : 'every write went alone', async () => {
    const { count, sum } = await batchSizes(runs[mode]);
    if (mode === 'on' && CITUS) {
      // Asked to batch on Citus: each write went as a batch of one.
      expect(sum).toBe((HOT_WRITERS + COLD_WRITERS) * ATTEMPTS);
      expect(count).toBe(sum);
    } else if (mode === 'on') {
      expect(count).toBeGreaterThan(0);
      expect(sum).toBe((HOT_WRITERS + COLD_WRITERS) * ATTEMPTS);
      expect(sum).toBeGreaterThan(count);
    } else expect(count).toBe(0);
  });
});

test('records of their own get the same history batched or not', async () => {
  const strip = (rows: Row[]) =>
    rows
      .filter((h) => h.rid.startsWith('cold-'))
      .map(({ id: _id, ...h }) => h)
      .sort((a, b) => (a.rid < b.rid ? -1 : a.rid > b.rid ? 1 : a.version! - b.version!));
  const on = strip(await historyOf(runs.on));
  const off = strip(await historyOf(runs.off));
  expect(on).toHaveLength(COLD_WRITERS * ATTEMPTS);
  expect(on).toEqual(off);
  expect(on.every((h) => h.outcome === 'applied')).toBe(true);
});

afterAll(async () => {
  for (const r of Object.values(runs)) {
    await r.sql.end();
    await r.t.close();
  }
});
