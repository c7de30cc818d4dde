/**
 * The class watch's log position (issue 35 item 3, db/port.ts): one `(tx, id)` per node
 * group, and its cursor form — one part (the form cursors always had, so those issued before
 * stay valid) on plain PostgreSQL, a part per group on Citus. Pure: no database.
 */
import { describe, expect, test } from 'vitest';
import { advance, ahead, covers, GROUP_SPAN, join, type LogPosition } from '../../db/port.js';
import { decodeWatchCursor, encodeWatchCursor } from '../../handlers/cursor.js';
import { SvcError } from '../../handlers/errors.js';

const KEY = 'k'.repeat(32);
const payload = (c: string) => JSON.parse(Buffer.from(c.split('.')[0], 'base64url').toString('utf8'));

describe('the log position', () => {
  test('transaction ids are compared within a group only; the group is the row’s, not its id’s range', () => {
    const pos: LogPosition = { '1': { tx: '900', id: GROUP_SPAN + 9 } };
    // Group 2's transaction 5 is not "before" group 1's 900: nothing of group 2 was read.
    expect(covers(pos, { group: '2', tx: '5', id: 2 * GROUP_SPAN + 1 })).toBe(false);
    expect(covers(pos, { group: '1', tx: '899', id: GROUP_SPAN + 20 })).toBe(true);
    expect(covers(pos, { group: '1', tx: '900', id: GROUP_SPAN + 10 })).toBe(false);
    // A record moved from group 1 to group 2 keeps rising ids in group 1's range (migration
    // 0024), written with group 2's transaction ids: it is group 2's row.
    expect(covers(pos, { group: '2', tx: '5', id: GROUP_SPAN + 20 })).toBe(false);
    const next = advance(pos, { group: '2', tx: '5', id: 2 * GROUP_SPAN + 1 });
    expect(next).toEqual({ '1': pos['1'], '2': { tx: '5', id: 2 * GROUP_SPAN + 1 } });
    expect(ahead(next, pos)).toBe(true);
    expect(ahead(pos, next)).toBe(false);
    // xid8 beyond 2^53 compares exactly.
    expect(covers({ '0': { tx: '9007199254740993', id: 1 } }, { group: '0', tx: '9007199254740992', id: 7 })).toBe(true);
  });

  test('join takes the later part of every group', () => {
    const a: LogPosition = { '1': { tx: '10', id: 1 }, '2': { tx: '50', id: 2 } };
    const b: LogPosition = { '1': { tx: '20', id: 3 }, '3': { tx: '1', id: 4 } };
    expect(join(a, b)).toEqual({ '1': { tx: '20', id: 3 }, '2': { tx: '50', id: 2 }, '3': { tx: '1', id: 4 } });
    expect(join(a, a)).toBe(a);
  });
});

describe('the class watch cursor', () => {
  test('group 0 alone keeps the original one-part form, so cursors issued before still decode', async () => {
    const c = await encodeWatchCursor(KEY, 'incident', { pos: { '0': { tx: '812', id: 77 } }, at: 1_700_000_000_000 });
    expect(payload(c)).toEqual({ t: 'watch', b: 'incident', x: '812', p: 77, a: 1_700_000_000_000 });
    expect(await decodeWatchCursor(KEY, c, 'incident', {})).toEqual({ pos: { '0': { tx: '812', id: 77 } }, at: 1_700_000_000_000 });
  });

  test('several groups carry a part each and decode to the same position', async () => {
    const pos: LogPosition = { '2': { tx: '3000', id: 2 * GROUP_SPAN + 4 }, '1': { tx: '12', id: Number.MAX_SAFE_INTEGER } };
    const c = await encodeWatchCursor(KEY, 'incident', { pos, at: 5 });
    expect(payload(c).v).toEqual([
      [1, '12', Number.MAX_SAFE_INTEGER],
      [2, '3000', 2 * GROUP_SPAN + 4],
    ]);
    expect(await decodeWatchCursor(KEY, c, 'incident', {})).toEqual({ pos, at: 5 });
    await expect(decodeWatchCursor(KEY, c, 'other', {})).rejects.toBeInstanceOf(SvcError);
  });
});
