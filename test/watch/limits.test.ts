/**
 * What bounds a watch (issue 16): a slow client is closed rather than buffered, the open
 * streams per process are capped, a client that goes away frees its stream, and shutdown
 * ends every stream with a last event.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { incident } from '../fixtures/classes.js';
import { quietLog, startTestGateway, type TestGateway } from '../setup/gateway.js';
import { openWatch, waitFor, type Watch } from './sse.js';

let t: TestGateway;
const open: Watch[] = [];

beforeAll(async () => {
  t = await startTestGateway([incident], {
    extraArgs: ['--watch-poll-interval', '20ms', '--watch-queue', '5', '--watch-max-streams', '3'],
  });
});
afterAll(async () => {
  for (const w of open) w.close();
  await t?.close();
});

async function watch(who: string, path: string, headers: Record<string, string> = {}, url = t.url): Promise<Watch> {
  const w = await openWatch(url, who, path, headers);
  open.push(w);
  return w;
}

const hub = () => t.gw.services.watch;

describe('watch limits', () => {
  test('a client that does not read is closed once its queue is full, and resumes from its last id', async () => {
    await t.call('alice', 'PUT', '/v1/records/incident/slow/fields/blob', { value: 'start', expected_version: 0 });
    const w = await watch('alice', '/v1/records/incident/slow/watch');
    await w.next();
    w.pause();
    // 60 changes of 256 KiB: far more than the socket buffers and the queue of 5 hold.
    const big = 'x'.repeat(256 * 1024);
    for (let v = 1; v <= 60; v++) {
      const r = await t.call('alice', 'PUT', '/v1/records/incident/slow/fields/blob', { value: `${v}:${big}`, expected_version: v });
      expect(r.status).toBe(200);
    }
    await waitFor(() => hub().open === 0, 10_000, () => `the slow stream to be closed (open: ${hub().open})`);
    w.resume();
    await w.ended();
    const changes = w.events.filter((e) => e.event === 'change');
    expect(changes.length).toBeLessThan(60);
    const end = w.events.find((e) => e.event === 'end');
    if (end) expect(end.data).toMatchObject({ reason: 'slow' });
    // Resuming from the last id received gives the rest, without a gap or a repeat.
    const last = changes.length > 0 ? changes[changes.length - 1].id! : '1';
    const r = await watch('alice', '/v1/records/incident/slow/watch', { 'last-event-id': last });
    const rest = await r.until(1 + 61 - Number(last), 20_000);
    expect(rest.slice(1).map((e) => Number(e.id))).toEqual(Array.from({ length: 61 - Number(last) }, (_, k) => Number(last) + k + 1));
    r.close();
    await waitFor(() => hub().open === 0, 5_000, () => 'the stream to be released');
  });

  test('at most --watch-max-streams open streams; beyond it 503 UNAVAILABLE; a client going away frees its slot', async () => {
    await t.call('alice', 'PUT', '/v1/records/incident/cap/fields/title', { value: 'a', expected_version: 0 });
    const ws = [];
    for (let i = 0; i < 3; i++) {
      const w = await watch('alice', '/v1/records/incident/cap/watch');
      expect(w.status).toBe(200);
      ws.push(w);
    }
    expect(hub().open).toBe(3);
    const refused = await watch('alice', '/v1/classes/incident/watch');
    expect(refused.status).toBe(503);
    expect(refused.body).toMatchObject({ error: 'UNAVAILABLE' });
    expect(refused.body.message).toContain('--watch-max-streams');
    ws[0].close();
    await waitFor(() => hub().open === 2, 5_000, () => `a slot to free (open: ${hub().open})`);
    const again = await watch('alice', '/v1/classes/incident/watch');
    expect(again.status).toBe(200);
    for (const w of [...ws, again]) w.close();
    await waitFor(() => hub().open === 0, 5_000, () => 'every slot to free');
  });

  test('shutdown ends every stream with a last `end` event and does not wait for them', async () => {
    const g = await startTestGateway([incident], { db: t.db, log: quietLog });
    try {
      await g.call('alice', 'PUT', '/v1/records/incident/down/fields/title', { value: 'a', expected_version: 0 });
      const a = await watch('alice', '/v1/records/incident/down/watch', {}, g.url);
      const b = await watch('alice', '/v1/classes/incident/watch', {}, g.url);
      await a.next();
      await b.next();
      const started = Date.now();
      await g.gw.shutdown(10_000);
      expect(Date.now() - started).toBeLessThan(5_000);
      for (const w of [a, b]) {
        await w.ended();
        expect(w.events.at(-1)).toMatchObject({ event: 'end', data: { reason: 'shutdown' } });
      }
    } finally {
      await g.close().catch(() => undefined);
    }
  });
});
