/**
 * Lapsed leases and the worker gauges (decisions §5; interface "Worker metrics"): the sweep
 * flags task fields whose lease expired unreclaimed, every transport shows them as
 * `lease_lapsed: true` until someone claims, and each gauge's value matches the data.
 */
import pg from 'pg';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { createPool, PgDb } from '../../db/kysely/index.js';
import { sweep, type SweepDeps } from '../../worker/sweep.js';
import { freePort } from '../setup/ports.js';
import { useGatewayWithSql, quietLog, type ClassInput, type TestGateway } from '../setup/gateway.js';
import { grpcAdapter, httpAdapter, mcpAdapter, type Adapter } from '../transports/clients.js';

const jobs: ClassInput = {
  name: 'jobs',
  namespace: 'team-j',
  spec: {
    fields: { job: { kind: 'task', leaseSeconds: 60 }, note: { kind: 'soft' } },
    roles: { crew: { subjects: ['apikey:alice', 'apikey:bob'], read: ['*'], write: ['*'] } },
  },
};
const watch: ClassInput = {
  name: 'watch',
  namespace: 'team-w',
  spec: {
    fields: { title: { kind: 'versioned' } },
    roles: {
      a: { subjects: ['apikey:alice'], read: ['*'], write: ['*'] },
      b: { subjects: ['apikey:bob'], read: ['*'], write: ['*'] },
      bots: { subjects: ['k8s-sa:team-x/*', 'apikey:carol'], read: ['*'], write: ['*'] },
    },
  },
};

let t: TestGateway;
let sql: pg.Client;
let db: PgDb;
let adapters: Adapter[];
let n = 0;
const deps = (over: Partial<SweepDeps> = {}): SweepDeps => ({ db, log: quietLog, holder: `test/gauges/${++n}`, ...over });

useGatewayWithSql((g, c) => ((t = g), (sql = c)), [jobs, watch], async () => ({ extraArgs: ['--grpc-port', String(await freePort())] }));
beforeAll(() => {
  db = new PgDb(createPool({ connectionString: t.db.url, max: 4 }));
  adapters = [httpAdapter(t.url), mcpAdapter(t.url), grpcAdapter(`127.0.0.1:${t.gw.grpcPort}`)];
});
afterAll(async () => {
  for (const a of adapters ?? []) await a.close();
  await db?.kysely.destroy();
});

const put = (who: string, cls: string, id: string, field: string, body: unknown) =>
  t.call(who, 'PUT', `/v1/records/${cls}/${id}/fields/${field}`, body);

test('a lease that expired unreclaimed is flagged by the sweep, shown on HTTP, MCP and gRPC (get and query), counted, and cleared by a claim', async () => {
  expect((await t.call('alice', 'PUT', '/v1/records/jobs/j1/fields/job/claim')).status).toBe(201);
  expect((await t.call('alice', 'PUT', '/v1/records/jobs/j2/fields/job/claim')).status).toBe(201);
  // j1's lease ran out (database clock); j2's is still held.
  await sql.query(`update fields set lease_expires_at = now() - interval '1 second' where name = 'job' and record_id = (select id from records where rid = 'j1')`);
  const lapsedColumn = async (rid: string) =>
    (await sql.query(`select f.lease_lapsed from fields f join records r on r.rid = f.rid and r.id = f.record_id where r.rid = $1 and f.name = 'job'`, [rid])).rows[0]
      .lease_lapsed;
  expect(await lapsedColumn('j1')).toBe(false);

  const r = await sweep(deps());
  expect(r.ok, JSON.stringify(r.errors)).toBe(true);
  expect(r.leases).toEqual({ flagged: 1, more: false });
  expect(r.gauges!.leasesLapsed).toBe(1);
  expect(await lapsedColumn('j1')).toBe(true);
  expect(await lapsedColumn('j2')).toBe(false);
  // A second sweep flags nothing new and still counts it.
  const again = await sweep(deps());
  expect(again.leases!.flagged).toBe(0);
  expect(again.gauges!.leasesLapsed).toBe(1);

  for (const a of adapters) {
    const g1 = await a.run('bob', 'get', { record: 'jobs/j1' });
    expect(g1.code, `${a.name} ${JSON.stringify(g1.body)}`).toBe('OK');
    const job1 = (g1.body as any).fields.job;
    expect(job1.lease_lapsed, a.name).toBe(true);
    expect(job1.owner, a.name).toBeUndefined(); // nobody holds it
    const g2 = await a.run('bob', 'get', { record: 'jobs/j2' });
    const job2 = (g2.body as any).fields.job;
    expect(job2.lease_lapsed ?? false, a.name).toBe(false);
    expect(job2.owner, a.name).toBe('apikey:alice');
    const q = await a.run('bob', 'query', { class: 'jobs', filters: {} });
    expect(q.code, `${a.name} ${JSON.stringify(q.body)}`).toBe('OK');
    const byId = Object.fromEntries((q.body as any).records.map((rec: any) => [rec.record.split('/')[1], rec.fields.job]));
    expect(byId.j1.lease_lapsed, a.name).toBe(true);
    expect(byId.j2.lease_lapsed ?? false, a.name).toBe(false);
  }

  // Bob takes the task over: no longer lapsed, and the gauge drops at the next sweep.
  const take = await t.call('bob', 'PUT', '/v1/records/jobs/j1/fields/job/claim');
  expect(take.status, JSON.stringify(take.body)).toBe(200);
  const after = await t.call('bob', 'GET', '/v1/records/jobs/j1');
  expect(after.body.fields.job.lease_lapsed).toBeUndefined();
  expect(after.body.fields.job.owner).toBe('apikey:bob');
  expect(await lapsedColumn('j1')).toBe(false);
  expect((await sweep(deps())).gauges!.leasesLapsed).toBe(0);
});

test('every gauge matches the data: records and history rows per class, lapsed leases, and live records no identity of a role wrote', async () => {
  const ok = async (p: Promise<{ status: number; body: unknown }>) => {
    const r = await p;
    expect(r.status, JSON.stringify(r.body)).toBeLessThan(300);
  };
  await ok(put('alice', 'watch', 'w1', 'title', { value: 1, expected_version: 0 }));
  await ok(put('bob', 'watch', 'w2', 'title', { value: 1, expected_version: 0 }));
  await ok(put('alice', 'watch', 'w3', 'title', { value: 1, expected_version: 0 }));
  await ok(put('bob', 'watch', 'w3', 'title', { value: 2, expected_version: 1 }));
  await ok(put('alice', 'watch', 'w4', 'title', { value: 1, expected_version: 0 }));
  // bob's attempt on w4 is refused: a rejected write is history but not "wrote".
  expect((await put('bob', 'watch', 'w4', 'title', { value: 9, expected_version: 0 })).status).toBe(409);
  // Service-account authors (written as the gateway would store them): team-x/* matches the
  // first only; team-xy is another namespace.
  await sql.query(
    `insert into history (class, rid, field, op, version, record_version, value, author, outcome)
     values ('watch', 'w1', 'title', 'put', 2, 2, '2', 'k8s-sa:team-x/bot', 'applied'),
            ('watch', 'w2', 'title', 'put', 2, 2, '2', 'k8s-sa:team-xy/bot', 'applied')`,
  );

  let seen: { g: unknown; classes: string[] } | null = null;
  const r = await sweep(deps({ onGauges: (g, classes) => (seen = { g, classes: classes.map((c) => c.name) }) }));
  expect(r.ok, JSON.stringify(r.errors)).toBe(true);
  const g = r.gauges!;
  const jobsRecords = Number((await sql.query(`select count(*) as n from records where class = 'jobs'`)).rows[0].n);
  const jobsHistory = Number((await sql.query(`select count(*) as n from history where class = 'jobs'`)).rows[0].n);
  expect(jobsRecords).toBe(2);
  expect(g.records).toEqual(new Map([['jobs', jobsRecords], ['watch', 4]]));
  // w1 1+1, w2 1+1, w3 2, w4 1 applied + 1 rejected
  expect(g.historyRows).toEqual(new Map([['jobs', jobsHistory], ['watch', 8]]));
  expect(g.leasesLapsed).toBe(0);
  expect(g.roleWroteNothing).toEqual(
    new Map([
      ['jobs/crew', 0],
      ['watch/a', 1], // w2
      ['watch/b', 2], // w1, w4 (its attempt was refused)
      ['watch/bots', 3], // all but w1
    ]),
  );
  expect(seen).not.toBeNull();
  expect(seen!.classes.sort()).toEqual(['jobs', 'watch']);
});
