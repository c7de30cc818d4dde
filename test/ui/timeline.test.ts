/**
 * The console's timeline (runtime/http/ui/timeline.ts) on hand-made history pages: what it can
 * and cannot say when the rows that explain an attempt are not on the page.
 */
import { describe, expect, test } from 'vitest';
import { buildTimeline, type HistoryRow } from '../../runtime/http/ui/timeline.js';

let seq = 0;
const row = (r: Partial<HistoryRow> & Pick<HistoryRow, 'field' | 'op' | 'outcome'>): HistoryRow => ({
  seq: ++seq,
  author: 'apikey:alice',
  created_at: '2026-11-24T06:00:00.000+00:00',
  ...r,
});

describe('buildTimeline', () => {
  test('oldest first, whatever order the page came in; outcomes labelled in text', () => {
    const a = row({ field: 'title', op: 'put', outcome: 'applied', version: 1, value: 'x' });
    const b = row({ field: 'title', op: 'put', outcome: 'held' });
    const t = buildTimeline([b, a], true);
    expect(t.map((x) => x.row.seq)).toEqual([a.seq, b.seq]);
    expect(t.map((x) => [x.tone, x.label])).toEqual([
      ['ok', 'applied'],
      ['warn', 'rejected: HELD'],
    ]);
  });

  test('a STALE attempt on a complete page: the diff from what the field held to what it wanted', () => {
    const t = buildTimeline(
      [
        row({ field: 'n', op: 'put', outcome: 'applied', version: 1, value: { a: 1, b: 2 } }),
        row({ field: 'n', op: 'put', outcome: 'stale', value: { a: 1, b: 3 }, expected_version: 0, author: 'apikey:bob' }),
      ],
      true,
    );
    expect(t[1].stale?.version).toBe(1);
    expect(t[1].stale?.diff?.filter((p) => p.kind !== 'same')).toEqual([
      { kind: 'removed', text: '  "b": 2' },
      { kind: 'added', text: '  "b": 3' },
    ]);
  });

  test('the rows that explain an attempt are older than the page: no diff is guessed', () => {
    const t = buildTimeline(
      [
        row({ field: 'n', op: 'put', outcome: 'stale', value: 3, expected_version: 4 }),
        row({ field: 'm', op: 'put', outcome: 'stale_premise', value: 1, based_on: [{ field: 'n', version: 2 }] }),
      ],
      false,
    );
    expect(t[0].stale).toEqual({});
    expect(t[1].moved).toEqual([{ field: 'n', kind: undefined, cited: 2, then: undefined, author: undefined }]);
  });

  test('takeover and fence marks; a takeover with no earlier claim on the page says so', () => {
    const t = buildTimeline(
      [
        row({ field: 'job', op: 'claim', outcome: 'applied', version: 1 }),
        row({ field: 'job', op: 'takeover', outcome: 'applied', version: 2, author: 'apikey:bob' }),
        row({ field: 'title', op: 'put', outcome: 'applied', version: 1, value: 'v', based_on: [{ field: 'job', version: 2, kind: 'fence' }] }),
      ],
      true,
    );
    expect(t[1].marks).toEqual([{ tone: 'warn', text: 'takeover from apikey:alice' }]);
    expect(t[2].marks).toEqual([{ tone: 'info', text: 'fenced on job v2' }]);
    const alone = buildTimeline([row({ field: 'job', op: 'takeover', outcome: 'applied', version: 5 })], false);
    expect(alone[0].marks).toEqual([{ tone: 'warn', text: 'takeover of a lapsed lease' }]);
  });

  test('a transaction is one attempt: applied as a whole, or refused at its failing write with the others not applied', () => {
    const ok = '11111111-2222-3333-4444-555555555555';
    const bad = '99999999-2222-3333-4444-555555555555';
    const before = row({ field: 'title', op: 'put', outcome: 'applied', version: 1, value: 'a' });
    const t1 = row({ field: 'title', op: 'put', outcome: 'applied', version: 2, value: 'b', record_version: 2, transaction: { id: ok, index: 0 } });
    const t2 = row({ field: 'memo', op: 'put', outcome: 'applied', version: 1, value: 1, record_version: 2, transaction: { id: ok, index: 1 } });
    const r1 = row({ field: 'memo', op: 'put', outcome: 'not_applied', value: 2, transaction: { id: bad, index: 0, failed_index: 1 } });
    const r2 = row({ field: 'title', op: 'put', outcome: 'stale', value: 'c', expected_version: 1, transaction: { id: bad, index: 1 } });
    const t = buildTimeline([r2, r1, t2, t1, before], true);
    expect(t.map((x) => [x.tone, x.label])).toEqual([
      ['ok', 'applied'],
      ['ok', 'transaction of 2 writes: applied'],
      ['bad', 'transaction refused at write 1: STALE'],
    ]);
    expect(t[1].writes!.map((w) => w.row.seq)).toEqual([t1.seq, t2.seq]);
    expect(t[1].marks).toEqual([{ tone: 'info', text: 'transaction 11111111' }]);
    expect(t[2].row.seq).toBe(r2.seq);
    expect(t[2].writes!.map((w) => w.label)).toEqual(['not applied', 'rejected: STALE']);
    // The refused write's diff is against the state the transaction before it left.
    expect(t[2].writes![1].stale).toMatchObject({ version: 2 });
  });
});
