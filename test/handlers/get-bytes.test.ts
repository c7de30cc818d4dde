/**
 * The get answer, byte for byte (issue 32 item 5): one renderer (handlers/pipeline.ts
 * renderField, values spliced as stored by fieldJson) writes every get, so these bytes are
 * pinned for every field kind, a reader of every field and a scoped one, append entries with
 * entries_limit, a held and a lapsed task, premises and invocation. The
 * times are set to known instants, sub-millisecond parts included, so they are pinned too.
 */
import type pg from 'pg';
import { expect, test } from 'vitest';
import { TIME_ZONE_IS_UTC } from '../../handlers/format.js';
import { useGatewayWithSql, type ClassInput, type TestGateway } from '../setup/gateway.js';

const cls: ClassInput = {
  name: 'bytes',
  spec: {
    fields: {
      v: { kind: 'versioned' },
      s: { kind: 'soft' },
      job: { kind: 'task', leaseSeconds: 300 },
      gone: { kind: 'task', leaseSeconds: 300 },
      log: { kind: 'append' },
    },
    roles: {
      writer: { subjects: ['apikey:alice'], read: ['*'], write: ['*'] },
      partial: { subjects: ['apikey:bob'], read: ['v', 'job', 'gone', 'log'], write: [] },
    },
  },
};

let t: TestGateway;
let sql: pg.Client;
useGatewayWithSql((gw, c) => ((t = gw), (sql = c)), [cls]);

async function ok(method: string, path: string, body: unknown): Promise<void> {
  const r = await t.call('alice', method, path, body);
  expect(r.status, JSON.stringify(r.body)).toBeLessThan(300);
}

async function raw(who: string, q = ''): Promise<string> {
  const res = await fetch(`${t.url}/v1/records/bytes/r1${q}`, { headers: { authorization: `Bearer ${who}-test-key` } });
  expect(res.status).toBe(200);
  return res.text();
}

test.runIf(TIME_ZONE_IS_UTC)('every field kind, both readers, entries_limit, named fields', async () => {
  const R = '/v1/records/bytes/r1/fields';
  await ok('PUT', `${R}/s`, { value: { note: 'é "q"\n', n: [1.5, -0, 1e21, null] } });
  await ok('PUT', `${R}/v`, { value: 'x', expected_version: 0, evidence: 'saw it', based_on: [{ field: 's', version: 1 }], invocation: { tool: 't', run: 'r1' } });
  await ok('PUT', `${R}/v`, { value: null, expected_version: 1, based_on: [{ field: 's', version: 1 }, { field: 'job', version: 0 }] });
  await ok('PUT', `${R}/job/claim`, { lease_seconds: 60 });
  await ok('PUT', `${R}/gone/claim`, { lease_seconds: 60 });
  for (const [i, e] of ['a', { b: 2 }, [3]].entries()) await ok('POST', `${R}/log/entries`, { entry: e, evidence: `e${i}`, based_on: i === 1 ? [{ field: 's', version: 1 }] : undefined });
  await sql.query(`update fields set updated_at = '2026-11-27 04:00:00.5259+00' where rid = 'r1'`);
  await sql.query(`update entries set created_at = timestamptz '2026-11-27 04:00:01.0009+00' + seq * interval '1 ms' where rid = 'r1'`);
  await sql.query(`update fields set lease_expires_at = '2099-01-02 03:04:05.6789+00' where rid = 'r1' and name = 'job'`);
  await sql.query(`update fields set lease_expires_at = '2020-01-02 03:04:05.6789+00' where rid = 'r1' and name = 'gone'`);

  const at = '"updated_at":"2026-11-27T04:00:00.525+00:00"';
  const task = (name: string, tail: string) => `"${name}":{"version":1,"author":"apikey:alice","identity_strength":"shared-secret",${at}${tail}}`;
  const entry = (seq: number, value: string, extra = '') =>
    `{"seq":${seq},"value":${value},"author":"apikey:alice","identity_strength":"shared-secret","evidence":"e${seq - 1}","updated_at":"2026-11-27T04:00:01.00${seq}+00:00"${extra}}`;
  const s = `"s":{"value":{"note":"é \\"q\\"\\n","n":[1.5,0,1e+21,null]},"version":1,"author":"apikey:alice","identity_strength":"shared-secret",${at}}`;
  const v = (premises: string) => `"v":{"value":null,"version":2,"author":"apikey:alice","identity_strength":"shared-secret"${premises},${at}}`;
  const gone = task('gone', ',"lease_lapsed":true');
  const job = task('job', ',"owner":"apikey:alice","lease_expires_at":"2099-01-02T03:04:05.678+00:00"');

  expect(await raw('alice')).toBe(
    `{"record":"bytes/r1","record_version":8,"fields":{${gone},${job},"log":{"version":3,"entries":[${entry(1, '"a"')},${entry(2, '{"b":2}', ',"based_on":[{"field":"s","version":1}]')},${entry(3, '[3]')}]},${s},${v(',"based_on":[{"field":"s","version":1},{"field":"job","version":0}]')}}}`,
  );
  // bob may not read s: neither the field nor the premises on it. entries_limit keeps the newest.
  expect(await raw('bob', '?entries_limit=2')).toBe(
    `{"record":"bytes/r1","record_version":8,"fields":{${gone},${job},"log":{"version":3,"entries":[${entry(2, '{"b":2}')},${entry(3, '[3]')}]},${v(',"based_on":[{"field":"job","version":0}]')}}}`,
  );
  expect(await raw('alice', '?fields=s,v')).toBe(`{"record":"bytes/r1","record_version":8,"fields":{${s},${v(',"based_on":[{"field":"s","version":1},{"field":"job","version":0}]')}}}`);
});
