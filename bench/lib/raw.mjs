/**
 * The raw-SQL baseline: the same database work the gateway does for put and get, straight
 * from the pg driver, one connection per simulated client in a tight loop. The statements
 * mirror the gateway's (db/kysely: kslate_write, readRecord), named as it names them; on an
 * older schema, the write path that schema had.
 *
 * Mirrored by hand: when db/kysely/ (writes.ts, record.ts) changes what it sends, change this file too. The
 * harness checks it each run (bench/lib/plans.mjs compares the statements the gateway sent,
 * caught with auto_explain, with `rawStatements`) and warns when they differ. The lock step
 * follows the schema: kslate_lock_record() (migration 0002) when the database has it, else the
 * two statements of migration 0001's write path.
 */
import pg from 'pg';
import { CLASS, FIELD_COLUMNS, pgTypes } from './db.mjs';
import { Latencies, ownedIndex, randInt } from './util.mjs';

// Migration 0002: the lock and the fields read in one round trip.
const LOCK_FN = `select * from kslate_lock_record($1, $2, $3::text[])`;

// Migration 0001: lock the record row, then read the fields in a second statement.
const LOCK = `select id, record_version, now() as db_now from records
    where class = $1 and rid = $2
    for update`;

const LOCK_FIELDS = `select ${FIELD_COLUMNS} from fields f
      where f.record_id = $1 and f.name = any($2::text[])`;

// PgWriteTx.applyField for an existing record and a versioned field: one statement sending
// each text once (the `p` row, which also measures the row for the byte budget, migration
// 0003), raising the record version, upserting the field and inserting the history row.
const APPLY = `with p as (
    select t.v, t.ev, t.bo, t.inv, coalesce(octet_length(t.v), 0) as vbytes,
           coalesce(octet_length(t.ev), 0) + coalesce(octet_length(t.bo), 0) + coalesce(octet_length(t.inv), 0) as mbytes
    from (select $1::text as v, $2::text as ev, $3::text as bo, $4::text as inv) t),
      r as (update records set record_version = record_version + 1, last_write_at = now()
            where id = $5 returning id, record_version),
      f as (
        insert into fields (record_id, class, name, kind, value, version, record_version, author,
                            identity_strength, evidence, based_on, invocation, updated_at, owner, lease_expires_at, bytes)
        select r.id, $6, $7, $8, p.v::json, $9, r.record_version,
               $10, $11, p.ev, p.bo::jsonb,
               p.inv::json, now(), $12, $13::timestamptz,
               p.vbytes + p.mbytes
        from r, p
        on conflict (record_id, name) do update set
          value = excluded.value, version = excluded.version, record_version = excluded.record_version,
          author = excluded.author, identity_strength = excluded.identity_strength,
          evidence = excluded.evidence, based_on = excluded.based_on, invocation = excluded.invocation,
          updated_at = excluded.updated_at, owner = excluded.owner, lease_expires_at = excluded.lease_expires_at,
          lease_lapsed = false, bytes = excluded.bytes
      ),
      h as (
        insert into history (class, rid, field, op, version, record_version, value, author, identity_strength,
                             evidence, expected_version, based_on, invocation, outcome, bytes)
        select $14, $15, $16, $17, $18, r.record_version,
               p.v::json, $19, $20, p.ev,
               $21, p.bo::jsonb, p.inv::json, 'applied', p.vbytes + p.mbytes
        from r, p
      )
      select id, record_version from r`;

const READ_RECORD = `select id, record_version, created_at from records where class = $1 and rid = $2`;
// readRecord's fields with the response's byte budget ($1, $2: 16 MiB): values come along
// when all the fields fit (always, here).
const FB = `coalesce(f.bytes, coalesce(pg_column_size(f.value), 0) + coalesce(pg_column_size(f.evidence), 0)) + 256`;
const READ_FIELDS = `select ${FIELD_COLUMNS.replace('f.value,', `case when sum(${FB}) over () <= $1 then f.value end as value,`)},
               ${FB} as sz, sum(${FB}) over () <= $2 as fits
        from fields f
        where f.record_id = $3 and f.name = any($4::text[])
        order by f.name`;
const MAX_RESPONSE_BYTES = 16 * 1024 * 1024;

// Migration 0005: the whole applied write in one autocommitted statement, named (TRY_WRITE in
// the gateway before migration 0010); a version mismatch writes nothing and answers applied = false.
const TRY_WRITE = {
  name: 'kslate_try_write',
  text: 'select applied, version, record_version, created from kslate_try_write($1, $2, $3, $4, $5, $6::jsonb, $7, $8, $9, $10, $11, $12, $13, $14)',
};
// Since migration 0005's build: readRecord's record and its fields (as one json text, times
// as epoch ms) in one named statement.
const READ_ONE = {
  name: 'kslate_read_record_some',
  text: `
        select r.id as rec_id, r.record_version as rec_version, floor(extract(epoch from r.created_at) * 1000)::bigint as rec_created,
          (select coalesce(json_agg(json_build_array(
              x.name, x.kind, case when x.fits then x.value end, x.version, x.record_version, x.author, x.identity_strength,
              x.evidence, x.based_on, x.invocation, floor(extract(epoch from x.updated_at) * 1000)::bigint, x.owner, floor(extract(epoch from x.lease_expires_at) * 1000)::bigint,
              x.lease_lapsed, kslate_lease_held(x.owner, x.lease_expires_at, now()), x.sz, x.fits) order by x.name), '[]')::text
           from (select f.*, ${FB} as sz, sum(${FB}) over () <= $1 as fits
                 from fields f
                 where f.record_id = r.id and array_position($2::text[], f.name) is not null) x) as fields
        from records r
        where r.class = $3 and r.rid = $4`,
};

// Since issue 32's one renderer (db/kysely/record.ts readRecord): a get (the handler always
// names the fields: those the caller's role may read) is one named statement, the record's
// head and its fields as one text: a JSON array of arrays (times as epoch ms, no values),
// then each value's stored text after a \x01.
const READ_NAMED = {
  name: 'kslate_read_record_some',
  text: `
        select r.id as rec_id, r.record_version as rec_version, floor(extract(epoch from r.created_at) * 1000)::bigint as rec_created,
          floor(extract(epoch from r.expires_at) * 1000)::bigint as rec_expires, floor(extract(epoch from r.last_write_at) * 1000)::bigint as rec_last_write,
          (select coalesce(json_agg(json_build_array(
              x.name, x.kind, null, x.version, x.record_version, x.author, x.identity_strength,
              x.evidence, x.based_on, x.invocation, floor(extract(epoch from x.updated_at) * 1000)::bigint, x.owner, floor(extract(epoch from x.lease_expires_at) * 1000)::bigint,
              x.lease_lapsed, kslate_lease_held(x.owner, x.lease_expires_at, now()), x.sz, x.fits) order by x.name)::text, '[]')
              || coalesce(string_agg(case when x.fits then chr(1) || coalesce(x.value::text, 'null') end, '' order by x.name), '')
           from (select f.*, ${FB} as sz, sum(${FB}) over () <= $1 as fits
                 from fields f
                 where f.rid = $2 and f.record_id = r.id and array_position($3::text[], f.name) is not null) x) as fields
        from records r
        where r.class = $4 and r.rid = $5`,
};

// Migration 0010: every put decided and applied (or refused) in one autocommitted statement,
// named (WRITE in db/kysely/writes.ts).
const WRITE = {
  name: 'kslate_write',
  text: 'select outcome, version, record_version, created, cur_author, cur_value, cur_evidence, cur_updated_ms, moved, missing, expires_ms from kslate_write($1, $2, $3, $4, $5, $6, $7::jsonb, $8::text[], $9, $10, $11, $12, $13, $14, $15, $16::integer)',
};

let lockFn = false;
let tryWrite = false;
let write = false;

/** Which write path the database offers (call once the schema is applied). */
export async function detectLock(client) {
  // By name in pg_proc, not to_regproc(): that answers null for an overloaded name, and
  // kslate_write has had more than one signature since migration 0022, which sent the baseline
  // back to migration 0001's five-statement put without anyone noticing but the drift warning.
  const { rows } = await client.query(
    `select to_regprocedure('kslate_lock_record(text,text,text[])') is not null as has,
            exists (select 1 from pg_proc where proname = 'kslate_try_write') as try,
            exists (select 1 from pg_proc where proname = 'kslate_write') as write`,
  );
  lockFn = Boolean(rows[0].has);
  tryWrite = Boolean(rows[0].try);
  write = Boolean(rows[0].write);
  if (write) return 'kslate_write() (1 autocommitted statement, named)';
  if (tryWrite) return 'kslate_try_write() (1 autocommitted statement, named)';
  return lockFn ? 'kslate_lock_record() (1 statement)' : 'select ... for update + select fields (2 statements)';
}

/** The statements a raw put and get send, besides begin/commit (for the drift check). */
export const rawStatements = {
  put: () => (write ? [WRITE.text] : tryWrite ? [TRY_WRITE.text] : lockFn ? [LOCK_FN, APPLY] : [LOCK, LOCK_FIELDS, APPLY]),
  get: () => (write ? [READ_NAMED.text] : tryWrite ? [READ_ONE.text] : [READ_RECORD, READ_FIELDS]),
};

/** Lock bench/<rid> and read field f1: { id, version } of the record and the field. */
async function lockAndRead(c, rid) {
  if (lockFn) {
    const rows = (await c.query(LOCK_FN, [CLASS, rid, ['f1']])).rows;
    const f = rows.find((r) => r.name === 'f1');
    return { id: rows[0].rec_id, current: f ? Number(f.version) : 0 };
  }
  const rec = (await c.query(LOCK, [CLASS, rid])).rows[0];
  const f = (await c.query(LOCK_FIELDS, [rec.id, ['f1']])).rows[0];
  return { id: rec.id, current: f ? Number(f.version) : 0 };
}

/**
 * One versioned put of field f1 on bench/r-<idx> with the expected version `versions[idx]`:
 * BEGIN; lock the record and read the field; compare; apply; COMMIT. Returns true when applied.
 */
export async function rawPut(c, idx, versions, author, value) {
  const rid = `r-${idx}`;
  const expected = versions[idx];
  if (write) {
    const { rows } = await c.query({
      ...WRITE,
      // The last argument is the write's ttl_seconds (issue 37): none.
      values: [CLASS, rid, 'f1', 'versioned', 'put', expected, null, null, author, 'shared-secret', JSON.stringify(value), null, 'null', 'null', expected, null],
    });
    // A STALE answers the field's current version (and writes its history row, as the gateway's does).
    versions[idx] = Number(rows[0].version);
    return rows[0].outcome === 'applied';
  }
  if (tryWrite) {
    const v = JSON.stringify(value);
    const { rows } = await c.query({
      ...TRY_WRITE,
      values: [CLASS, rid, 'f1', 'versioned', expected, null, author, 'shared-secret', v, null, null, null, 'put', expected],
    });
    // Declined: the function answers the field's current version (the gateway would now
    // run its full transaction for the STALE body; the baseline just resynchronises).
    versions[idx] = Number(rows[0].version);
    return rows[0].applied;
  }
  await c.query('begin');
  try {
    const { id, current } = await lockAndRead(c, rid);
    if (current !== expected) {
      await c.query('rollback');
      versions[idx] = current;
      return false;
    }
    const version = current + 1;
    const v = JSON.stringify(value);
    await c.query(APPLY, [
      v, null, null, null, id, CLASS, 'f1', 'versioned', version, author, 'shared-secret', null, null,
      CLASS, rid, 'f1', 'put', version, author, 'shared-secret', expected,
    ]);
    await c.query('commit');
    versions[idx] = version;
    return true;
  } catch (e) {
    await c.query('rollback').catch(() => undefined);
    throw e;
  }
}

/** The reads of a get: the record row, then its fields (readRecord). */
export async function rawGet(c, rid, names) {
  if (write) {
    const { rows } = await c.query({ ...READ_NAMED, values: [MAX_RESPONSE_BYTES, rid, names, CLASS, rid] });
    // What the gateway then does with it: split the values off and one JSON.parse.
    return JSON.parse(rows[0].fields.split('\x01', 1)[0]).length;
  }
  if (tryWrite) {
    const { rows } = await c.query({ ...READ_ONE, values: [MAX_RESPONSE_BYTES, rid, names, CLASS, rid] });
    // What the gateway then does with it: one JSON.parse.
    return JSON.parse(rows[0].fields).length;
  }
  const rec = (await c.query(READ_RECORD, [CLASS, rid])).rows[0];
  const id = Number(rec.id);
  const fields = await c.query(READ_FIELDS, [MAX_RESPONSE_BYTES, MAX_RESPONSE_BYTES, id, names]);
  return fields.rows.length;
}

/**
 * `n` connections, each with an 'error' listener (a server that goes away first, e.g. at the
 * end of a failed run, must not crash the harness); if one cannot connect (too many clients),
 * the ones already open are closed before the error goes up.
 */
export async function connectAll(url, n) {
  const conns = [];
  try {
    for (let i = 0; i < n; i++) {
      const c = new pg.Client({ connectionString: url, types: pgTypes });
      c.on('error', () => undefined);
      conns.push(c);
      await c.connect();
    }
  } catch (e) {
    await Promise.all(conns.map((c) => c.end().catch(() => undefined)));
    throw e;
  }
  return conns;
}

/**
 * Run `op(client, i)` in a tight loop on `clients` connections: `warmup` seconds unrecorded,
 * then `duration` seconds recorded (inside probe.start/stop). op returns true when it counts
 * as ok (applied or read).
 */
export async function rawRun({ url, clients, warmup, duration, op, probe }) {
  const conns = await connectAll(url, clients);
  const phase = async (secs, lat) => {
    const until = performance.now() + secs * 1000;
    let ok = 0;
    let other = 0;
    await Promise.all(
      conns.map(async (c, i) => {
        while (performance.now() < until) {
          const t = performance.now();
          const good = await op(c, i);
          lat?.push(performance.now() - t);
          if (good) ok++;
          else other++;
        }
      }),
    );
    return { ok, other };
  };
  try {
    if (warmup > 0) await phase(warmup, null);
    const lat = new Latencies();
    probe.start();
    const t0 = performance.now();
    const { ok, other } = await phase(duration, lat);
    const seconds = (performance.now() - t0) / 1000;
    const p = probe.stop();
    return { seconds, ok, responses: ok + other, other, latency: lat.summary(), probe: p };
  } finally {
    await Promise.all(conns.map((c) => c.end().catch(() => undefined)));
  }
}

/**
 * Open loop over raw SQL: operation k is due at start + k/rate and runs on the next free
 * connection (of `clients`); its latency counts from when it was due, as openLoop does for
 * HTTP. `op(client)` returns true when it counts as ok.
 */
export async function rawOpenLoop({ url, clients, warmup, duration, rate, op, probe }) {
  const conns = await connectAll(url, clients);
  const phase = (secs, lat) =>
    new Promise((resolve) => {
      const free = [...conns];
      const waiting = [];
      const total = Math.max(1, Math.floor(rate * secs));
      const interval = 1000 / rate;
      const start = performance.now();
      let sent = 0;
      let done = 0;
      let ok = 0;
      const runOn = (c, due) => {
        op(c).then(
          (good) => finish(c, due, good),
          () => finish(c, due, false),
        );
      };
      const finish = (c, due, good) => {
        lat?.push(performance.now() - due);
        if (good) ok++;
        done++;
        const next = waiting.shift();
        if (next !== undefined) runOn(c, next);
        else free.push(c);
        if (done === total) resolve({ ok, responses: done, seconds: (performance.now() - start) / 1000 });
      };
      const tick = () => {
        const now = performance.now();
        while (sent < total && start + sent * interval <= now) {
          const due = start + sent * interval;
          const c = free.pop();
          if (c) runOn(c, due);
          else waiting.push(due);
          sent++;
        }
        if (sent < total) setTimeout(tick, Math.max(0, start + sent * interval - performance.now()));
      };
      tick();
    });
  try {
    if (warmup > 0) await phase(warmup, null);
    const lat = new Latencies();
    probe.start();
    const r = await phase(duration, lat);
    const p = probe.stop();
    return { ...r, latency: lat.summary(), probe: p };
  } finally {
    await Promise.all(conns.map((c) => c.end().catch(() => undefined)));
  }
}

export { ownedIndex, randInt };
