/**
 * query over records spread across shards (issue 35): the page's fields and the latest entry
 * of each append field, on plain PostgreSQL and on Citus (vitest.citus.config.ts BEHAVIOUR),
 * where the page's records lie on several workers and db/kysely/query.ts reads them by
 * statements Citus pushes down. Which records and what each shows, as sets: on Citus a
 * record's id (the creation order query answers in) is drawn on its worker.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_RESPONSE_BYTES, MIB } from '../../handlers/format.js';
import type { ClassInput } from '../setup/gateway.js';
import { startTestGateway, type TestGateway } from '../setup/gateway.js';

const spread: ClassInput = {
  name: 'spread',
  spec: {
    fields: {
      title: { kind: 'versioned', type: 'string' },
      log: { kind: 'append' },
      note: { kind: 'append' },
      tag: { kind: 'versioned', type: 'string' },
    },
    roles: { owner: { subjects: ['apikey:alice'], read: ['*'], write: ['*'] } },
  },
};

let t: TestGateway;
beforeAll(async () => {
  t = await startTestGateway([spread]);
}, 120_000);
afterAll(() => t?.close());

async function ok(method: string, path: string, body?: unknown) {
  const r = await t.call('alice', method, path, body);
  expect(r.status, JSON.stringify(r.body).slice(0, 300)).toBeLessThan(300);
  return r.body;
}
const bytesOf = (body: unknown) => Buffer.byteLength(JSON.stringify(body));

describe('query over records spread across shards', () => {
  it('each record with its fields and the latest entry of each append field', async () => {
    const ids = Array.from({ length: 16 }, (_, i) => `s${i}`);
    for (const [i, id] of ids.entries()) {
      await ok('PUT', `/v1/records/spread/${id}/fields/tag`, { value: 'all', expected_version: 0 });
      await ok('PUT', `/v1/records/spread/${id}/fields/title`, { value: `title ${i}`, expected_version: 0 });
      for (let n = 1; n <= (i % 3) + 1; n++) {
        await ok('POST', `/v1/records/spread/${id}/fields/log/entries`, { entry: { i, n }, evidence: `ev${n}` });
      }
      if (i % 2 === 0) await ok('POST', `/v1/records/spread/${id}/fields/note/entries`, { entry: `note ${i}`, evidence: 'x' });
    }
    const page = await ok('GET', '/v1/records/spread?tag=all&limit=100');
    expect(page).not.toHaveProperty('next_after');
    const byRecord = new Map<string, any>(page.records.map((r: any) => [r.record, r]));
    expect([...byRecord.keys()].sort()).toEqual(ids.map((id) => `spread/${id}`).sort());
    for (const [i, id] of ids.entries()) {
      const row = byRecord.get(`spread/${id}`);
      const entries = (i % 3) + 1;
      expect(row.fields.title).toMatchObject({ value: `title ${i}`, version: 1 });
      expect(row.fields.log.version).toBe(entries);
      expect(row.fields.log.entries).toHaveLength(1);
      expect(row.fields.log.entries[0]).toMatchObject({ seq: entries, value: { i, n: entries }, evidence: `ev${entries}` });
      if (i % 2 === 0) {
        expect(row.fields.note.entries).toHaveLength(1);
        expect(row.fields.note.entries[0]).toMatchObject({ seq: 1, value: `note ${i}` });
      } else {
        expect(row.fields).not.toHaveProperty('note');
      }
    }
  });

  it('six records whose latest entry is 3.9 MiB: pages stop at 16 MiB, each record once, with its latest entry', async () => {
    const large = 'e'.repeat(3.9 * MIB);
    for (let i = 0; i < 6; i++) {
      await ok('PUT', `/v1/records/spread/big${i}/fields/tag`, { value: 'big', expected_version: 0 });
      await ok('POST', `/v1/records/spread/big${i}/fields/log/entries`, { entry: 'small', evidence: 'x' });
      await ok('POST', `/v1/records/spread/big${i}/fields/log/entries`, { entry: large, evidence: 'x' });
    }
    const seen: string[] = [];
    let pages = 0;
    let after: string | undefined;
    do {
      const page = await ok('GET', `/v1/records/spread?tag=big${after ? `&after=${encodeURIComponent(after)}` : ''}`);
      pages++;
      expect(page.records.length).toBeGreaterThan(0);
      expect(bytesOf(page)).toBeLessThanOrEqual(MAX_RESPONSE_BYTES + 4 * MIB);
      for (const r of page.records) expect(r.fields.log.entries).toEqual([expect.objectContaining({ seq: 2, value: large })]);
      seen.push(...page.records.map((r: { record: string }) => r.record));
      after = page.next_after;
    } while (after);
    expect(pages).toBeGreaterThan(1);
    expect([...seen].sort()).toEqual([0, 1, 2, 3, 4, 5].map((i) => `spread/big${i}`));
  });
});
