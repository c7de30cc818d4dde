/**
 * Metric label values come only from what the class registry knows (issue 10, defect 2):
 * `svc_rejections_total{class=…}` took the class name straight from the URL, so any key,
 * even one with no role, minted series without bound (20 s of requests: RSS 90 MB → 1.38 GB,
 * /metrics 320 MB). Unknown classes and fields are labelled `_unknown`; 401 and 429 are
 * counted with fixed labels.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { invoke, operations } from '../../handlers/index.js';
import { makeCtx } from '../../runtime/request.js';
import { incident } from '../fixtures/classes.js';
import { startTestGateway, type TestGateway } from '../setup/gateway.js';

let t: TestGateway;
beforeAll(async () => {
  t = await startTestGateway([incident]);
});
afterAll(() => t?.close());

const rnd = () => `x${randomBytes(6).toString('hex')}`;

async function series(name: string) {
  const metrics = await t.gw.services.metrics.registry.getMetricsAsJSON();
  const m = metrics.find((x) => x.name === name) as { values: { labels: Record<string, string>; value: number }[] } | undefined;
  return m?.values ?? [];
}

it('100,000 random class and field names through the handlers mint no series', async () => {
  const alice = { author: 'apikey:alice', provider: 'apikey', name: 'alice', strength: 'shared-secret' } as const;
  const before = (await series('svc_rejections_total')).length;
  for (let i = 0; i < 50_000; i++) {
    const ctx = makeCtx(t.gw.services, alice, undefined);
    await invoke(operations.get, ctx, { class: rnd(), id: 'r1' }).catch(() => undefined);
    const ctx2 = makeCtx(t.gw.services, alice, undefined);
    const body = { kind: 'json' as const, value: { value: 1, expected_version: 0 } };
    await invoke(operations.put, ctx2, { class: 'incident', id: 'r1', field: rnd(), body }).catch(() => undefined);
  }
  const values = await series('svc_rejections_total');
  // One series for unknown classes, one for unknown fields (plus whatever existed before).
  expect(values.length - before).toBeLessThanOrEqual(2);
  const labels = values.map((v) => v.labels);
  expect(labels).toContainEqual(expect.objectContaining({ class: '_unknown', outcome: 'not_found' }));
  expect(labels).toContainEqual(expect.objectContaining({ class: 'incident', field: '_unknown', outcome: 'unknown_field' }));
  const total = values.reduce((n, v) => n + v.value, 0);
  expect(total).toBeGreaterThanOrEqual(100_000);
}, 120_000);

it('over HTTP: random classes, with and without a role, and bad credentials keep /metrics small', async () => {
  const sizeBefore = (await (await fetch(`${t.gw.metricsUrl}/metrics`)).text()).length;
  for (let i = 0; i < 500; i++) {
    // dave has a key but no role anywhere; alice has a role in incident only.
    await t.call(i % 2 ? 'dave' : 'alice', 'GET', `/v1/records/${rnd()}/r1`);
    await t.call('alice', 'GET', `/v1/records/incident/r1?fields=${rnd()}`);
  }
  for (let i = 0; i < 20; i++) await t.call(`not-a-key-${rnd()}`, 'GET', '/v1/classes');
  const text = await (await fetch(`${t.gw.metricsUrl}/metrics`)).text();
  expect(text).not.toMatch(/class="x[0-9a-f]{12}"/);
  expect(text).not.toMatch(/field="x[0-9a-f]{12}"/);
  expect(text.length - sizeBefore).toBeLessThan(2_000);
  // 401s are counted with fixed labels.
  expect(text).toMatch(/svc_rejections_total\{class="",field="",role="",outcome="unauthenticated"\} 20/);
});
