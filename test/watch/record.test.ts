/**
 * The per-record watch (issue 16): GET /v1/records/{class}/{id}/watch as Server-Sent Events
 * over a real socket, against a real PostgreSQL.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { incident } from '../fixtures/classes.js';
import { startTestGateway, TS, type TestGateway } from '../setup/gateway.js';
import { openWatch, type Watch } from './sse.js';

let t: TestGateway;
const open: Watch[] = [];

beforeAll(async () => {
  t = await startTestGateway([incident], { extraArgs: ['--watch-poll-interval', '20ms', '--watch-heartbeat', '300ms'] });
});
afterAll(async () => {
  for (const w of open) w.close();
  await t?.close();
});

async function watch(who: string, path: string, headers: Record<string, string> = {}): Promise<Watch> {
  const w = await openWatch(t.url, who, path, headers);
  open.push(w);
  return w;
}

const put = async (id: string, field: string, value: unknown, expected_version?: number, who = 'alice') => {
  const r = await t.call(who, 'PUT', `/v1/records/incident/${id}/fields/${field}`, {
    value,
    ...(expected_version !== undefined ? { expected_version } : {}),
  });
  expect(r.status, JSON.stringify(r.body)).toBeLessThan(300);
  return r.body;
};

describe('per-record watch', () => {
  test('streams every applied change after from_record_version, in order, with record_version as the id', async () => {
    await put('w1', 'title', 'one', 0);
    await put('w1', 'severity', 2, 0);
    const w = await watch('alice', '/v1/records/incident/w1/watch?from_record_version=0');
    expect(w.status).toBe(200);
    expect(w.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const opened = await w.next();
    expect(opened).toMatchObject({ event: 'open', id: '0', data: { record: 'incident/w1', record_version: 0 } });
    const a = await w.next();
    expect(a).toMatchObject({ event: 'change', id: '1' });
    expect(a.data).toMatchObject({ record: 'incident/w1', field: 'title', op: 'put', version: 1, record_version: 1, value: 'one', author: 'apikey:alice' });
    expect(a.data.created_at).toMatch(TS);
    expect((await w.next()).data).toMatchObject({ field: 'severity', value: 2, record_version: 2 });
    // Live: a change after the stream started.
    await put('w1', 'title', 'two', 1);
    expect((await w.next()).data).toMatchObject({ field: 'title', value: 'two', version: 2, record_version: 3 });
  });
});
