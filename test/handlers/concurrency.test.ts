/**
 * Compare-and-set under concurrency: many simultaneous puts over real sockets against one
 * gateway and PostgreSQL. Exactly one write per expected version may apply.
 */
import pg from 'pg';
import { describe, expect, test } from 'vitest';
import { incident } from '../fixtures/classes.js';
import { WIDE_FIELDS, wide } from '../fixtures/put-classes.js';
import { type TestGateway, useGatewayWithSql, writeBatches } from '../setup/gateway.js';
import { CITUS } from '../setup/citus.js';


const N = 50;

let t: TestGateway;
let sql: pg.Client;
// Both modes of --write-batching in this one file (docs/performance.md "Coalesced writes"), each
// on a gateway and database of its own with a pool of 2: writes queue once two are in flight,
// which these concurrent writers reach, so the 'on' run forms real batches (checked last).
describe.each(['on', 'off'] as const)('--write-batching %s', (mode) => {
  useGatewayWithSql((g, c) => ((t = g), (sql = c)), [incident, wide], { extraArgs: ['--write-batching', mode, '--db-pool-size', '2'] });

  type Res = { status: number; body: any };

  const put = (cls: string, id: string, field: string, body: unknown): Promise<Res> =>
    t.call('alice', 'PUT', `/v1/records/${cls}/${id}/fields/${field}`, body);

  async function titleHistory(id: string): Promise<any[]> {
    const h = await t.call('alice', 'GET', `/v1/records/incident/${id}/history?field=title`);
    expect(h.status, JSON.stringify(h.body)).toBe(200);
    return h.body.history;
  }

  test(`${N} concurrent puts with the same expected_version: one applies, ${N - 1} are STALE`, async () => {
    const id = 'race-update';
    // Bring title to version 3 first.
    for (let v = 0; v < 3; v++) {
      const r = await put('incident', id, 'title', { value: `seed ${v}`, expected_version: v });
      expect([200, 201]).toContain(r.status);
    }
    const results = await Promise.all(
      Array.from({ length: N }, (_, i) => put('incident', id, 'title', { value: `racer ${i}`, expected_version: 3 })),
    );
    const applied = results.filter((r) => r.status === 200 || r.status === 201);
    const stale = results.filter((r) => r.status === 409 && r.body?.error === 'STALE');
    expect(results.filter((r) => !applied.includes(r) && !stale.includes(r)).map((r) => r.body)).toEqual([]);
    expect(applied.length, JSON.stringify(applied.map((r) => [r.status, r.body]))).toBe(1);
    expect(stale).toHaveLength(N - 1);
    const winner = applied[0];
    expect(winner.status).toBe(200);
    expect(winner.body).toEqual({ record: `incident/${id}`, field: 'title', version: 4, record_version: 4 });
    const winnerValue = `racer ${results.indexOf(winner)}`;

    // Every loser saw the winner's write, never a half-applied state.
    for (const s of stale) {
      expect(s.body).toMatchObject({ field: 'title', your_version: 3, current_version: 4, current_value: winnerValue });
    }

    const g = await t.call('alice', 'GET', `/v1/records/incident/${id}`);
    expect(g.body.fields.title).toMatchObject({ value: winnerValue, version: 4 });
    expect(g.body.record_version).toBe(4);

    // History: the 3 seed writes, then exactly N rows for this attempt set (1 applied + N-1 stale).
    const rows = await titleHistory(id);
    expect(rows).toHaveLength(3 + N);
    const attempt = rows.filter((r) => r.expected_version === 3);
    expect(attempt).toHaveLength(N);
    expect(attempt.filter((r) => r.outcome === 'applied')).toHaveLength(1);
    expect(attempt.filter((r) => r.outcome === 'stale')).toHaveLength(N - 1);
    const appliedRow = attempt.find((r) => r.outcome === 'applied');
    expect(appliedRow).toMatchObject({ field: 'title', op: 'put', version: 4, value: winnerValue });
    for (const r of attempt.filter((x) => x.outcome === 'stale')) expect(r).not.toHaveProperty('version');

    // The same, counted in the database.
    const c = await sql.query<{ outcome: string; n: string }>(
      `select outcome, count(*) as n from history
       where class = 'incident' and rid = $1 and field = 'title' and expected_version = 3 group by outcome`,
      [id],
    );
    expect(Object.fromEntries(c.rows.map((r) => [r.outcome, Number(r.n)]))).toEqual({ applied: 1, stale: N - 1 });
  });

  test('five rounds of concurrent puts on one field: exactly one applies per round', async () => {
    const id = 'race-rounds';
    expect((await put('incident', id, 'severity', { value: 0, expected_version: 0 })).status).toBe(201);
    const rounds = 5;
    const perRound: number[] = [];
    for (let round = 1; round <= rounds; round++) {
      const results = await Promise.all(
        Array.from({ length: N }, (_, i) => put('incident', id, 'severity', { value: round * 1000 + i, expected_version: round })),
      );
      expect(results.filter((r) => r.status !== 200 && r.status !== 409).map((r) => r.body)).toEqual([]);
      perRound.push(results.filter((r) => r.status === 200).length);
    }
    expect(perRound).toEqual(Array(rounds).fill(1));
    const g = await t.call('alice', 'GET', `/v1/records/incident/${id}`);
    expect(g.body.fields.severity.version).toBe(1 + rounds);
    expect(g.body.record_version).toBe(1 + rounds);
  });

  test(`${N} concurrent first writes on a record that does not exist: one 201, ${N - 1} STALE, one record`, async () => {
    const id = 'race-create';
    const results = await Promise.all(
      Array.from({ length: N }, (_, i) => put('incident', id, 'title', { value: `first ${i}`, expected_version: 0 })),
    );
    const created = results.filter((r) => r.status === 201);
    const stale = results.filter((r) => r.status === 409 && r.body?.error === 'STALE');
    expect(results.filter((r) => r.status !== 201 && !stale.includes(r)).map((r) => [r.status, r.body])).toEqual([]);
    expect(created.length, JSON.stringify(created.map((r) => r.body))).toBe(1);
    expect(stale).toHaveLength(N - 1);
    expect(created[0].body).toEqual({ record: `incident/${id}`, field: 'title', version: 1, record_version: 1 });
    const winnerValue = `first ${results.indexOf(created[0])}`;
    for (const s of stale) {
      expect(s.body).toMatchObject({ field: 'title', your_version: 0, current_version: 1, current_value: winnerValue });
    }

    const recs = await sql.query<{ n: string }>(`select count(*) as n from records where class = 'incident' and rid = $1`, [id]);
    expect(Number(recs.rows[0].n)).toBe(1);
    const fields = await sql.query<{ n: string }>(
      `select count(*) as n from fields f join records r on r.rid = f.rid and r.id = f.record_id where r.class = 'incident' and r.rid = $1`,
      [id],
    );
    expect(Number(fields.rows[0].n)).toBe(1);

    const g = await t.call('alice', 'GET', `/v1/records/incident/${id}`);
    expect(g.body.record_version).toBe(1);
    expect(g.body.fields.title).toMatchObject({ value: winnerValue, version: 1 });

    const rows = await titleHistory(id);
    expect(rows).toHaveLength(N);
    expect(rows.filter((r) => r.outcome === 'applied')).toHaveLength(1);
    expect(rows.filter((r) => r.outcome === 'stale')).toHaveLength(N - 1);
  });

  test('concurrent puts to different fields of one record all apply; record_version ends at the count', async () => {
    const id = 'many-fields';
    const results = await Promise.all(
      WIDE_FIELDS.map((f, i) => put('wide', id, f, { value: i, expected_version: 0 })),
    );
    expect(results.filter((r) => r.status !== 200 && r.status !== 201).map((r) => r.body)).toEqual([]);
    // Exactly one write created the record.
    expect(results.filter((r) => r.status === 201)).toHaveLength(1);
    for (const [i, r] of results.entries()) {
      expect(r.body).toMatchObject({ record: `wide/${id}`, field: WIDE_FIELDS[i], version: 1 });
    }
    // Each applied write got its own record_version: 1..count, no duplicates.
    const rvs = results.map((r) => r.body.record_version).sort((a, b) => a - b);
    expect(rvs).toEqual(WIDE_FIELDS.map((_, i) => i + 1));
    const created = results.find((r) => r.status === 201)!;
    expect(created.body.record_version).toBe(1);

    const g = await t.call('alice', 'GET', `/v1/records/wide/${id}`);
    expect(g.body.record_version).toBe(WIDE_FIELDS.length);
    expect(Object.keys(g.body.fields).sort()).toEqual([...WIDE_FIELDS].sort());
    for (const [i, f] of WIDE_FIELDS.entries()) expect(g.body.fields[f]).toMatchObject({ value: i, version: 1 });

    // A second concurrent round on every field raises it again by the count.
    const round2 = await Promise.all(WIDE_FIELDS.map((f, i) => put('wide', id, f, { value: i + 100, expected_version: 1 })));
    expect(round2.map((r) => r.status)).toEqual(WIDE_FIELDS.map(() => 200));
    const g2 = await t.call('alice', 'GET', `/v1/records/wide/${id}`);
    expect(g2.body.record_version).toBe(2 * WIDE_FIELDS.length);
  });

  // On Citus (vitest.citus.config.ts) the gateway sends every write alone whatever the flag
  // says (a batch would span shards: docs/scale-out.md): there 'on' carries one write a statement.
  test(
    mode === 'on' && !CITUS ? 'writes were coalesced: some statements carried more than one write' : mode === 'on' ? 'on Citus every write went alone' : 'no write went through the batcher',
    async () => {
      const b = await writeBatches(t);
      if (mode === 'on' && CITUS) {
        expect(b.statements).toBeGreaterThan(0);
        expect(b.batches).toBe(0);
      } else if (mode === 'on') expect(b.batches).toBeGreaterThan(0);
      else expect(b.statements).toBe(0);
    },
  );
});
