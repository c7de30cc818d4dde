/**
 * The minimal reference gateway (issue 15, item 1): what a versioned put and a get cost when
 * the design does the least it can — `node:http` + `pg` Pool(16) on the same database and the
 * same seeded records, a put that is ONE round trip (a plpgsql function: row lock, version
 * compare, field update, record_version bump, history insert) and a get that is ONE SELECT
 * returning the record with its fields as one JSON document, both named prepared statements.
 * No validation beyond shape, no classes, no roles, no metrics, no logging on the hot path;
 * the bearer key is a Map lookup. It is the design bar the kslate gateway is measured against
 * (`ratio to reference`), not a product: it answers only what the bench's put and get clients
 * send, in the same HTTP shapes the kslate gateway answers them:
 *
 *   PUT /v1/records/<class>/<id>/fields/<field>  {value, expected_version}
 *     -> 200 {record, field, version, record_version} (201 when the field is new)
 *     -> 409 {error: 'STALE', message, record, field, your_version, current_version}
 *   GET /v1/records/<class>/<id>  -> 200 {record, record_version, fields: {name: {value, version, ...}}}
 *   GET /v1/records/<class>/<id>/history?limit=N  -> 200 {record, history: [row, ...]} newest first,
 *       each row rendered by PostgreSQL at read time (json_build_object, nulls stripped) and the
 *       page sent through as text: the least a history read can do over the same table
 *   GET /v1/records/<class>/<id>/history?limit=N&rendered=1  -> the same page from
 *       `bench_ref_history_doc`, a side table holding each row's JSON already rendered (filled
 *       by `installReference` from the seeded history): what a design storing rows
 *       pre-rendered would cost to read (issue 15's history target)
 *
 * A rejected put leaves a `stale` history row, as the kslate gateway's do. The function is
 * created by the harness (`installReference`, `create or replace`: no migration); the server
 * runs as a child process (`startReference`) like `kslate serve`, so both pay the same
 * process and loopback costs and their CPU is measured the same way. Run directly:
 *   node bench/lib/reference.mjs --database-url URL --port N --identities K
 */
import { spawn } from 'node:child_process';
import http from 'node:http';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { RssSampler, tokenOf } from './gateway.mjs';
import { freePort, sleep } from './util.mjs';

export const REF_APP_NAME = 'kslate-bench-reference';
const POOL_SIZE = 16;

/** The whole versioned put in one call: lock, compare, apply (or record the rejection). */
export const REF_PUT_FUNCTION = /* sql */ `
create or replace function bench_ref_put(p_class text, p_rid text, p_field text, p_value text, p_expected bigint,
                                         p_author text, out o_status text, out o_version bigint, out o_record_version bigint)
language plpgsql as $fn$
declare
  v_id bigint;
  v_rv bigint;
  v_cur bigint;
  v_bytes integer := coalesce(octet_length(p_value), 0);
begin
  select r.id, r.record_version into v_id, v_rv from records r where r.class = p_class and r.rid = p_rid for update;
  if not found then
    o_status := 'not_found';
    return;
  end if;
  select f.version into v_cur from fields f where f.record_id = v_id and f.name = p_field;
  v_cur := coalesce(v_cur, 0);
  if v_cur <> p_expected then
    insert into history (class, rid, field, op, version, record_version, value, author, identity_strength,
                         expected_version, outcome, bytes)
    values (p_class, p_rid, p_field, 'put', null, v_rv, p_value::json, p_author, 'shared-secret', p_expected, 'stale', v_bytes);
    o_status := 'stale';
    o_version := v_cur;
    o_record_version := v_rv;
    return;
  end if;
  update records set record_version = record_version + 1, last_write_at = now() where id = v_id
    returning record_version into v_rv;
  o_version := v_cur + 1;
  o_record_version := v_rv;
  insert into fields (record_id, class, name, kind, value, version, record_version, author, identity_strength, updated_at, bytes)
  values (v_id, p_class, p_field, 'versioned', p_value::json, o_version, v_rv, p_author, 'shared-secret', now(), v_bytes)
  on conflict (record_id, name) do update set
    value = excluded.value, version = excluded.version, record_version = excluded.record_version,
    author = excluded.author, identity_strength = excluded.identity_strength, evidence = null, based_on = null,
    invocation = null, updated_at = excluded.updated_at, owner = null, lease_expires_at = null, lease_lapsed = false,
    bytes = excluded.bytes;
  insert into history (class, rid, field, op, version, record_version, value, author, identity_strength,
                       expected_version, outcome, bytes)
  values (p_class, p_rid, p_field, 'put', o_version, v_rv, p_value::json, p_author, 'shared-secret', p_expected, 'applied', v_bytes);
  o_status := case when v_cur = 0 then 'created' else 'applied' end;
end
$fn$`;

const PUT = { name: 'ref_put', text: 'select o_status, o_version, o_record_version from bench_ref_put($1, $2, $3, $4, $5, $6)' };

// The record and its fields as one JSON document, built by PostgreSQL and sent through as text.
const GET = {
  name: 'ref_get',
  text: `select json_build_object(
      'record', r.class || '/' || r.rid,
      'record_version', r.record_version,
      'fields', coalesce((select json_object_agg(f.name, json_build_object(
                   'value', f.value, 'version', f.version, 'author', f.author,
                   'identity_strength', f.identity_strength, 'updated_at', f.updated_at) order by f.name)
                 from fields f where f.record_id = r.id), '{}'::json))::text as doc
    from records r where r.class = $1 and r.rid = $2`,
  rowMode: 'array',
};

// One history row as the API renders it (keys in the same order; nulls left out; the time cut
// to the millisecond, as the gateway renders it since migration 0025).
const HISTORY_ROW_JSON = `json_strip_nulls(json_build_object(
    'seq', h.id, 'field', h.field, 'op', h.op, 'version', h.version, 'record_version', h.record_version,
    'value', h.value, 'value_size', h.value_size, 'value_sha256', h.value_sha256, 'author', h.author,
    'identity_strength', h.identity_strength, 'evidence', h.evidence, 'expected_version', h.expected_version,
    'based_on', h.based_on, 'invocation', h.invocation, 'outcome', h.outcome,
    'created_at', to_char(h.created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"+00:00"')))`;

// The newest `limit` rows rendered at read time, the page assembled by PostgreSQL as one text.
const HISTORY = {
  name: 'ref_history',
  text: `select '{"record":' || to_json($1 || '/' || $2)::text || ',"history":[' ||
      coalesce((select string_agg(${HISTORY_ROW_JSON}::text, ',' order by h.id desc)
                from (select * from history where class = $1 and rid = $2 order by id desc limit $3) h), '') || ']}'`,
  rowMode: 'array',
};

// The same page from rows stored already rendered (bench_ref_history_doc).
const HISTORY_RENDERED = {
  name: 'ref_history_rendered',
  text: `select '{"record":' || to_json($1 || '/' || $2)::text || ',"history":[' ||
      coalesce((select string_agg(d.doc, ',' order by d.id desc)
                from (select id, doc from bench_ref_history_doc where class = $1 and rid = $2 order by id desc limit $3) d), '') || ']}'`,
  rowMode: 'array',
};

/**
 * Create (or replace) the reference's put function in the bench database, and the side table
 * of pre-rendered history rows for the records named in `renderedRids` (the history scenario's).
 */
export async function installReference(client, { cls, renderedRids = [] } = {}) {
  await client.query(REF_PUT_FUNCTION);
  await client.query('drop table if exists bench_ref_history_doc');
  await client.query(`create table bench_ref_history_doc (class text not null, rid text not null, id bigint not null, doc text not null)`);
  if (cls && renderedRids.length > 0) {
    await client.query(
      `insert into bench_ref_history_doc select h.class, h.rid, h.id, ${HISTORY_ROW_JSON}::text from history h where h.class = $1 and h.rid = any($2)`,
      [cls, renderedRids],
    );
  }
  await client.query('create index on bench_ref_history_doc (class, rid, id desc)');
  await client.query('analyze bench_ref_history_doc');
}

export async function uninstallReference(client) {
  await client.query('drop function if exists bench_ref_put(text, text, text, text, bigint, text)');
  await client.query('drop table if exists bench_ref_history_doc');
}

// ---- the server (child process) -------------------------------------------------------------

function serve({ databaseUrl, port, identities }) {
  pg.types.setTypeParser(20, Number);
  // Idle connections close after a second, so the raw-SQL runs after it have the database's
  // connection slots (the harness waits for that: `drained`).
  const pool = new pg.Pool({ connectionString: databaseUrl, max: POOL_SIZE, idleTimeoutMillis: 1000, application_name: REF_APP_NAME });
  pool.on('error', (e) => process.stderr.write(`pool: ${e.message}\n`));
  const keys = new Map();
  for (let i = 0; i < identities; i++) keys.set(`Bearer ${tokenOf(i)}`, `apikey:bench-${i}`);

  const send = (res, status, body) => {
    res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
    res.end(body);
  };
  const fail = (res, e) => {
    process.stderr.write(`${e.stack ?? e}\n`);
    if (!res.headersSent) send(res, 500, JSON.stringify({ error: 'INTERNAL', message: String(e.message ?? e) }));
  };

  const server = http.createServer((req, res) => {
    const author = keys.get(req.headers.authorization);
    if (author === undefined) return void send(res, 401, '{"error":"UNAUTHENTICATED"}');
    const q = req.url.indexOf('?');
    const parts = (q < 0 ? req.url : req.url.slice(0, q)).split('/'); // '', v1, records, class, id[, fields, field]
    if (parts[1] !== 'v1' || parts[2] !== 'records' || parts.length < 5) return void send(res, 404, '{"error":"NOT_FOUND"}');
    const cls = decodeURIComponent(parts[3]);
    const rid = decodeURIComponent(parts[4]);
    if (req.method === 'GET' && parts.length === 6 && parts[5] === 'history') {
      const qs = new URLSearchParams(q < 0 ? '' : req.url.slice(q + 1));
      const limit = Math.min(10_000, Math.max(1, Number(qs.get('limit') ?? 1000) || 1000));
      const stmt = qs.get('rendered') === '1' ? HISTORY_RENDERED : HISTORY;
      pool.query({ ...stmt, values: [cls, rid, limit] }).then((r) => send(res, 200, r.rows[0][0]), (e) => fail(res, e));
      return;
    }
    if (req.method === 'GET' && parts.length === 5) {
      pool.query({ ...GET, values: [cls, rid] }).then((r) => {
        if (r.rows.length === 0) send(res, 404, JSON.stringify({ error: 'NOT_FOUND', record: `${cls}/${rid}` }));
        else send(res, 200, r.rows[0][0]);
      }, (e) => fail(res, e));
      return;
    }
    if (req.method === 'PUT' && parts.length === 7 && parts[5] === 'fields') {
      const field = decodeURIComponent(parts[6]);
      const chunks = [];
      req.on('data', (d) => chunks.push(d));
      req.on('end', () => {
        let b;
        try {
          b = JSON.parse(Buffer.concat(chunks).toString('utf8'));
        } catch {
          return void send(res, 400, '{"error":"INVALID_ARGUMENT","message":"body is not JSON"}');
        }
        if (b === null || typeof b !== 'object' || b.value === undefined || !Number.isInteger(b.expected_version)) {
          return void send(res, 400, '{"error":"INVALID_ARGUMENT","message":"want {value, expected_version}"}');
        }
        pool.query({ ...PUT, values: [cls, rid, field, JSON.stringify(b.value), b.expected_version, author] }).then((r) => {
          const { o_status: status, o_version: version, o_record_version: recordVersion } = r.rows[0];
          const record = `${cls}/${rid}`;
          if (status === 'applied' || status === 'created') {
            send(res, status === 'created' ? 201 : 200, JSON.stringify({ record, field, version, record_version: recordVersion }));
          } else if (status === 'stale') {
            send(res, 409, JSON.stringify({
              error: 'STALE',
              message: `Field "${field}" is at version ${version}, not ${b.expected_version}.`,
              record,
              field,
              your_version: b.expected_version,
              current_version: version,
            }));
          } else send(res, 404, JSON.stringify({ error: 'NOT_FOUND', record }));
        }, (e) => fail(res, e));
      });
      return;
    }
    send(res, 405, '{"error":"METHOD_NOT_ALLOWED"}');
  });
  server.keepAliveTimeout = 65_000;
  server.listen(port, '127.0.0.1', () => process.stdout.write(`reference gateway listening on 127.0.0.1:${port}\n`));
  const stop = () => {
    server.close();
    server.closeAllConnections?.();
    pool.end().finally(() => process.exit(0));
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}

// ---- the harness side -----------------------------------------------------------------------

/**
 * Spawn the reference gateway as a child process and wait for it to listen.
 * Returns { url, pid, sampler, tail, exited, stop(), drained(client) }.
 */
export async function startReference({ databaseUrl, identities }) {
  const port = await freePort();
  const child = spawn(
    process.execPath,
    [fileURLToPath(import.meta.url), '--database-url', databaseUrl, '--port', String(port), '--identities', String(identities)],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const tail = [];
  const keep = (line) => {
    tail.push(line);
    if (tail.length > 50) tail.shift();
  };
  let exited = null;
  const exitPromise = new Promise((resolve) =>
    child.once('exit', (code, signal) => {
      exited = { code, signal };
      resolve(exited);
    }),
  );
  child.stderr.on('data', (d) => keep(String(d).trimEnd()));
  await new Promise((resolve, reject) => {
    child.stdout.on('data', (d) => {
      keep(String(d).trimEnd());
      if (/listening/.test(String(d))) resolve();
    });
    exitPromise.then((e) => reject(new Error(`reference gateway exited (${e.code ?? e.signal}) before listening:\n${tail.join('\n')}`)));
    setTimeout(() => reject(new Error(`reference gateway did not listen within 30 s:\n${tail.join('\n')}`)), 30_000).unref();
  });
  const sampler = new RssSampler(child.pid);
  return {
    url: `http://127.0.0.1:${port}`,
    pid: child.pid,
    sampler,
    tail,
    get exited() {
      return exited;
    },
    /** Wait (up to 10 s) until the reference's idle pool connections have closed. */
    async drained(dbUrl, withClient) {
      for (let i = 0; i < 100; i++) {
        const n = await withClient(dbUrl, (c) =>
          c.query('select count(*)::int as n from pg_stat_activity where application_name = $1', [REF_APP_NAME]),
        ).then((r) => r.rows[0].n);
        if (n === 0) return;
        await sleep(100);
      }
    },
    async stop() {
      sampler.stop();
      if (exited) return exited;
      child.kill('SIGTERM');
      const t = setTimeout(() => child.kill('SIGKILL'), 10_000);
      const e = await exitPromise;
      clearTimeout(t);
      return e;
    },
  };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { values } = parseArgs({
    options: { 'database-url': { type: 'string' }, port: { type: 'string' }, identities: { type: 'string' } },
    strict: true,
  });
  serve({ databaseUrl: values['database-url'], port: Number(values.port), identities: Number(values.identities ?? 64) });
}
