/**
 * The hub's catch-up join (runtime/watch-hub.ts, Sub.catchUp): a class subscriber that starts
 * behind the hub reads the log on its own up to the hub's position, then joins the live feed
 * there. It may jump to that position only when its own read's frontier reached it: a read
 * that saw less of the log than the hub had (its frontier short of the hub's position) is
 * read again after a poll interval, and its changes still come, never skipped. The frontier
 * only rises (db/kysely/change-log.ts), so this is a guard: the test injects such a read at
 * the port (the first catch-up read answers as a snapshot taken before the changes would),
 * over a real database whose log holds the changes.
 */
import pg from 'pg';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { createPool, PgDb } from '../../db/kysely/index.js';
import type { ChangeLog, LogPosition } from '../../db/port.js';
import type { Logger } from '../../handlers/context.js';
import type { FeedItem, Subscription } from '../../handlers/watch-feed.js';
import { ChangeHub } from '../../runtime/watch-hub.js';
import { freshDatabase, type TestDb } from '../setup/db.js';

let db: TestDb;
let pool: pg.Pool;
let p: PgDb;
const subs: Subscription[] = [];

beforeAll(async () => {
  db = await freshDatabase();
  pool = createPool({ connectionString: db.url, max: 4, timeoutMs: 10_000 });
  p = new PgDb(pool);
}, 60_000);

afterAll(async () => {
  for (const s of subs) s.close();
  await pool?.end();
  await db?.drop();
});

/** The next `n` changes of `sub` (heartbeats skipped), or what came before `ms` ran out. */
async function changes(sub: Subscription, n: number, ms: number): Promise<FeedItem[]> {
  const got: FeedItem[] = [];
  const deadline = Date.now() + ms;
  while (got.length < n && Date.now() < deadline) {
    const item = await sub.next();
    if (item.type === 'change') got.push(item);
    if (item.type === 'end') break;
  }
  return got;
}

test("a catch-up read that saw less than the hub had is read again: the resumed stream still gets every change after its cursor", async () => {
  const warned: string[] = [];
  const logger: Logger = { debug() {}, info() {}, warn: (m) => warned.push(m), error() {} };
  let stale = false;
  // The real log, but the first catch-up read after `stale` is set answers as a read whose
  // snapshot predates the changes: nothing, with its frontier where it started.
  const log: ChangeLog = {
    logHead: () => p.logHead(),
    readRecordChanges: (c, r, v, o) => p.readRecordChanges(c, r, v, o),
    firstChangeSince: (c, s) => p.firstChangeSince(c, s),
    readLog: async (classes: string[], after: LogPosition, opts) => {
      if (stale && opts.upTo !== null) {
        stale = false;
        return { rows: [], frontier: after };
      }
      return p.readLog(classes, after, opts);
    },
  };
  const hub = new ChangeHub(
    log,
    {
      pollMs: 20,
      heartbeatMs: 100,
      queueMax: 100,
      queueBytes: 1 << 20,
      maxStreams: 10,
      maxStreamsPerOwner: 10,
      retentionMs: 3_600_000,
      pageBytes: 1 << 20,
      bufferBytes: 8 << 20,
      slowMs: 30_000,
      maxAgeMs: 3_600_000,
    },
    logger,
  );
  const live = await hub.subscribe({ kind: 'class', class: 'incident', after: null }, 'a');
  subs.push(live);
  // Three changes in three transactions, as the write functions leave them (applied rows).
  for (const v of ['one', 'two', 'three']) {
    await pool.query(
      `insert into history (class, rid, field, op, version, record_version, value, author, outcome)
       values ('incident', 'r-${v}', 'scratch', 'put', 1, 1, $1::json, 'apikey:alice', 'applied')`,
      [JSON.stringify(v)],
    );
  }
  const seen = await changes(live, 3, 10_000);
  expect(seen.map((i) => (i.type === 'change' ? i.row.rid : null))).toEqual(['r-one', 'r-two', 'r-three']);
  const first = seen[0];
  if (first.type !== 'change' || !first.pos) throw new Error('a live change carries its position');

  stale = true;
  const resumed = await hub.subscribe({ kind: 'class', class: 'incident', after: first.pos }, 'b');
  subs.push(resumed);
  const got = await changes(resumed, 2, 5_000);
  expect(got.map((i) => (i.type === 'change' ? i.row.rid : null))).toEqual(['r-two', 'r-three']);
  expect(stale, 'the injected read ran').toBe(false);
  expect(warned).toEqual(['watch: a catch-up read saw less of the change log than the hub had read; reading again']);
  hub.close();
});
