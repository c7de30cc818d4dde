/**
 * --db-pool-size bounds the gateway's request connections: concurrent requests beyond it wait
 * in the gateway for a connection instead of each holding a PostgreSQL backend.
 */
import { hostname } from 'node:os';
import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { incident } from '../fixtures/classes.js';
import { startTestGateway, type TestGateway } from '../setup/gateway.js';

let t: TestGateway;
beforeAll(async () => {
  t = await startTestGateway([incident], { extraArgs: ['--db-pool-size', '2'] });
});
afterAll(async () => {
  await t?.close();
});

it('opens at most --db-pool-size connections for requests, and answers every request', async () => {
  await t.call('alice', 'PUT', '/v1/records/incident/pool-1/fields/title', { value: 'x', expected_version: 0 });
  const watcher = new pg.Client({ connectionString: t.db.url });
  await watcher.connect();
  // The request pool's sessions carry the process's application name (runtime/services.ts).
  const name = `kslate ${hostname()}/${process.pid}`.slice(0, 63);
  let most = 0;
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      const { rows } = await watcher.query('select count(*)::int as n from pg_stat_activity where application_name = $1', [name]);
      most = Math.max(most, rows[0].n);
      await new Promise((r) => setTimeout(r, 2));
    }
  })();
  try {
    const answers = await Promise.all(
      Array.from({ length: 3 }, async () => {
        const out = [];
        // 40 at once, three times over: with the former default (20) this opened up to 20.
        for (const r of await Promise.all(Array.from({ length: 40 }, () => t.call('alice', 'GET', '/v1/records/incident/pool-1')))) out.push(r.status);
        return out;
      }),
    );
    expect(answers.flat().every((s) => s === 200)).toBe(true);
  } finally {
    sampling = false;
    await sampler;
    await watcher.end();
  }
  expect(most).toBeGreaterThan(0);
  expect(most).toBeLessThanOrEqual(2);
});
