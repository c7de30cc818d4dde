/**
 * What the gateway really sends to PostgreSQL, caught with auto_explain (embedded server
 * only, whose log the harness reads): after the measured scenarios, a second gateway is
 * started with fresh connections that load auto_explain (log_min_duration 0, ANALYZE,
 * BUFFERS), and one put, get, query and history request each go through it. The result:
 * every statement each operation ran, with its plan and timings, straight from the server:
 *  - EXPLAIN (ANALYZE, BUFFERS) of query and history without a hand-copied statement;
 *  - a check that the raw baseline still sends what the gateway sends for put and get
 *    (bench/lib/raw.mjs mirrors db/kysely/ by hand; this says when they drift).
 */
import { CLASS, HIST_RID, QCLASS, withClient } from './db.mjs';
import { authOf, startGateway } from './gateway.mjs';
import { rawStatements } from './raw.mjs';
import { sleep } from './util.mjs';

const SETTINGS = {
  session_preload_libraries: 'auto_explain',
  'auto_explain.log_min_duration': '0',
  'auto_explain.log_analyze': 'on',
  'auto_explain.log_buffers': 'on',
  'auto_explain.log_timing': 'on',
};

async function alterDb(url, set) {
  await withClient(url, async (c) => {
    await c.query(`load 'auto_explain'`);
    const { rows } = await c.query('select current_database() as db');
    const db = '"' + rows[0].db.replace(/"/g, '""') + '"';
    for (const [k, v] of Object.entries(SETTINGS)) {
      await c.query(set ? `alter database ${db} set ${k} = '${v}'` : `alter database ${db} reset ${k}`);
    }
  });
}

/** auto_explain log text -> [{ statement, ms, plan[] }] in log order. */
export function parseAutoExplain(text) {
  const out = [];
  for (const entry of text.split(/(?=LOG:\s+duration:)/)) {
    const m = /duration: ([\d.]+) ms\s+plan:\s*Query Text:([\s\S]*)$/.exec(entry);
    if (!m) continue;
    const lines = m[2].split('\n');
    const at = lines.findIndex((l) => /\(cost=|\(actual/.test(l));
    if (at < 0) continue;
    const head = lines.slice(0, at).join(' ');
    const statement = head.split(/Query Parameters:/)[0].replace(/\s+/g, ' ').trim();
    const plan = lines
      .slice(at)
      .map((l) => l.replace(/\s+$/, ''))
      // Drop blank lines and the next entry's log-line prefix ("postgres: <time> UTC [pid]").
      .filter((l) => l.trim() !== '' && !/\d{4}-\d\d-\d\d \d\d:\d\d:\d\d[.\d]* \w+ \[\d+\]/.test(l));
    out.push({ statement, ms: Number(m[1]), plan });
  }
  return out;
}

const norm = (s) => s.replace(/\s+/g, ' ').replace(/\$\d+/g, '$').trim().toLowerCase();
// Statements that belong to no request: the class cache refresh, the sweep, migrations.
const background = (s) => /from classes|kslate_meta|kslate_migrations|read_sets|scope_owners|pg_try_advisory_lock|pg_advisory_unlock|update classes|insert into classes/.test(s);

/**
 * Start a second gateway with auto_explain on, run one request of each kind twice (the
 * second is kept: the first may carry one-off work), and return the statements of each.
 * `pgLog` is the harness's PostgreSQL log tap: { begin(), take() -> text }.
 */
export async function capturePlans({ root, dbUrl, conf, pgLog, versions, say }) {
  await alterDb(dbUrl, true);
  let gw;
  try {
    gw = await startGateway({ root, databaseUrl: dbUrl, classesDir: conf.classesDir, keysFile: conf.keysFile });
    const call = (method, path, body) =>
      fetch(gw.url + path, {
        method,
        headers: { authorization: authOf(0), ...(body ? { 'content-type': 'application/json' } : {}) },
        body: body ? JSON.stringify(body) : undefined,
      }).then(async (r) => ({ status: r.status, body: await r.json() }));
    const ops = {
      put: async () => {
        const r = await call('PUT', `/v1/records/${CLASS}/r-0/fields/f1`, { value: { n: -1, c: 'plans' }, expected_version: versions[0] });
        if (r.status === 200) versions[0] = r.body.version;
        else if (r.status === 409) versions[0] = r.body.current_version;
        return r.status;
      },
      get: async () => (await call('GET', `/v1/records/${CLASS}/r-1`)).status,
      query: async () => (await call('GET', `/v1/records/${QCLASS}?team=team-42&limit=100`)).status,
      history: async () => (await call('GET', `/v1/records/${CLASS}/${HIST_RID}/history?limit=1000`)).status,
    };
    const out = {};
    for (const [name, op] of Object.entries(ops)) {
      let statements = [];
      for (let i = 0; i < 2; i++) {
        await sleep(300);
        pgLog.begin();
        const status = await op();
        await sleep(400); // the server's log reaches us through a pipe
        statements = parseAutoExplain(pgLog.take()).filter((s) => !background(s.statement));
        out[name] = { status, statements };
      }
    }
    const drift = {};
    for (const name of ['put', 'get']) {
      const gwSeq = out[name].statements.map((s) => norm(s.statement).slice(0, 70));
      const rawSeq = rawStatements[name]().map((s) => norm(s).slice(0, 70));
      drift[name] = {
        same: gwSeq.length === rawSeq.length && gwSeq.every((s, i) => s === rawSeq[i]),
        gateway: gwSeq,
        raw: rawSeq,
      };
      if (!drift[name].same) {
        say(`  WARNING: the raw ${name} baseline no longer sends what the gateway sends (update bench/lib/raw.mjs):`);
        say(`    gateway: ${gwSeq.join(' | ')}`);
        say(`    raw:     ${rawSeq.join(' | ')}`);
      }
    }
    return { operations: out, raw_matches_gateway: drift };
  } finally {
    await gw?.stop().catch(() => undefined);
    await alterDb(dbUrl, false).catch(() => undefined);
  }
}
