/**
 * The class watch's retained window follows the class history retention (issue 37): with
 * `history.maxAge` shorter than --watch-retention, a cursor older than maxAge answers 410
 * EXPIRED (its rows may be purged), and a cursor within it resumes.
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { startTestGateway, type TestGateway } from '../setup/gateway.js';
import { openWatch, type Watch } from './sse.js';

let t: TestGateway;
const open: Watch[] = [];
beforeAll(async () => {
  t = await startTestGateway(
    [
      {
        name: 'brief',
        namespace: 'team-a',
        spec: {
          history: { maxAge: '1s' },
          fields: { scratch: { kind: 'soft' } },
          roles: { crew: { subjects: ['apikey:alice'], read: ['*'], write: ['*'] } },
        },
      },
    ],
    { extraArgs: ['--watch-poll-interval', '20ms'] },
  );
});
afterAll(async () => {
  for (const w of open) w.close();
  await t?.close();
});

async function watch(path: string, headers: Record<string, string> = {}): Promise<Watch> {
  const w = await openWatch(t.url, 'alice', path, headers);
  open.push(w);
  return w;
}

test('a class watch cursor older than the class history maxAge answers 410 EXPIRED; a fresh one resumes', async () => {
  const w = await watch('/v1/classes/brief/watch');
  const { id: old } = await w.next();
  const openedAt = Date.now(); // at or after the cursor's time
  // A cursor taken now is inside the window.
  const fresh = await watch(`/v1/classes/brief/watch?from=${encodeURIComponent(old!)}`);
  expect(fresh.status).toBe(200);
  // Wait until the cursor is older than maxAge (1 s) by the gateway's own clock: a write's
  // applied time tells it.
  for (;;) {
    const r = await t.call('alice', 'PUT', '/v1/records/brief/x/fields/scratch', { value: Date.now() });
    expect(r.status).toBeLessThan(300);
    const h = await t.call('alice', 'GET', '/v1/records/brief/x/history?limit=1');
    if (Date.parse(h.body.history[0].created_at) - openedAt > 1_100) break;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  const e = await watch(`/v1/classes/brief/watch?from=${encodeURIComponent(old!)}`);
  expect(e.status).toBe(410);
  expect(e.body).toMatchObject({ error: 'EXPIRED', class: 'brief' });
  expect(e.body.message).toContain("retained window (1s)");
  expect(typeof e.body.oldest).toBe('string');
});
