/**
 * Reads from standbys (issue 34 item 4; docs/ha.md "Reads from standbys"): a PostgreSQL 15
 * primary with a streaming standby made by pg_basebackup (test/ha/streaming.ts), and a gateway
 * given the standby with --database-replica-url. Over real sockets:
 * - reads reach the standby: its own statistics (pg_stat_user_tables) count them;
 * - read-your-writes holds for 1,000 write→read pairs that send the write's X-Kslate-Lsn back
 *   as X-Kslate-Min-Lsn;
 * - with the standby's replay paused, tokened reads stay fresh (the primary serves them) and
 *   untokened reads stop using the standby once its lag passes --replica-max-lag, and use it
 *   again once replay resumes;
 * - a standby killed mid-load costs no failed read, and is used again once it is back.
 */
import net from 'node:net';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { parseConfig } from '../../runtime/config.js';
import { startGateway, type Gateway } from '../../runtime/serve.js';
import { gatewayFiles, KEYS, quietLog } from '../setup/gateway.js';
import { waitFor } from './cluster.js';
import { StreamingCluster } from './streaming.js';

const CLASS = {
  name: 'rep',
  spec: {
    fields: { title: { kind: 'versioned' as const } },
    roles: { all: { subjects: ['apikey:alice', 'apikey:bob'], read: ['*'], write: ['*'] } },
  },
};

/** The gateway's --replica-max-lag. */
const MAX_LAG_MS = 1_000;

let cluster: StreamingCluster;
let gw: Gateway;

beforeAll(async () => {
  cluster = await StreamingCluster.start(1);
  await cluster.sql(cluster.primary, 'create database kslate');
  await cluster.caughtUp();
  const files = gatewayFiles('kslate-replicas-', [CLASS]);
  const cfg = parseConfig(
    [
      '--database-url', cluster.url(cluster.primary, 'kslate'),
      '--database-replica-url', cluster.url(cluster.standbys[0], 'kslate'),
      '--replica-max-lag', `${MAX_LAG_MS}ms`,
      '--allow-async-replication', 'true',
      '--listen', '127.0.0.1:0',
      '--metrics-port', '0',
      '--identity', 'apikey',
      '--apikeys', files.apikeys,
      '--classes', files.classes,
      '--db-timeout', '5s',
    ],
    {},
  );
  gw = await startGateway(cfg, quietLog);
  // The schema and the class, reconciled at start, are on the standby before the tests read.
  await cluster.caughtUp();
}, 180_000);

afterAll(async () => {
  await gw?.close();
  await cluster?.stop();
});

async function call(method: string, path: string, body?: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(gw.url + path, {
    method,
    headers: { authorization: `Bearer ${KEYS.alice}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null, lsn: res.headers.get('x-kslate-lsn') };
}

/** svc_db_reads_total by target, from the gateway's metrics endpoint. */
async function readsByTarget(): Promise<Record<string, number>> {
  const text = await (await fetch(`${gw.metricsUrl}/metrics`)).text();
  const out: Record<string, number> = {};
  for (const m of text.matchAll(/^svc_db_reads_total\{target="([^"]+)"\} (\S+)$/gm)) out[m[1]] = Number(m[2]);
  return out;
}

async function metric(name: string, labels: string): Promise<number | undefined> {
  const text = await (await fetch(`${gw.metricsUrl}/metrics`)).text();
  const m = new RegExp(`^${name}\\{${labels}\\} (\\S+)$`, 'm').exec(text);
  return m ? Number(m[1]) : undefined;
}

/** Scans of kslate's tables counted by the standby's own statistics. */
async function standbyScans(): Promise<number> {
  const [row] = await cluster.sql<{ n: string }>(
    cluster.standbys[0],
    `select coalesce(sum(coalesce(seq_scan, 0) + coalesce(idx_scan, 0)), 0)::text as n from pg_stat_user_tables where relname in ('records', 'fields')`,
    [],
    'kslate',
  );
  return Number(row.n);
}

/** Put `value` on rep/<id>.title over `expected`; the answer's token. */
async function put(id: string, value: string, expected: number): Promise<string> {
  const r = await call('PUT', `/v1/records/rep/${id}/fields/title`, { value, expected_version: expected });
  expect(r.status, JSON.stringify(r.body)).toBeLessThan(300);
  expect(r.lsn).toMatch(/^[0-9A-F]+\/[0-9A-F]+$/);
  return r.lsn!;
}

it('reads reach the standby: its statistics count them, and so does svc_db_reads_total', async () => {
  await put('seen', 'v1', 0);
  await cluster.caughtUp();
  const before = await standbyScans();
  const reads0 = await readsByTarget();
  for (let i = 0; i < 50; i++) {
    const r = await call('GET', '/v1/records/rep/seen');
    expect(r.status).toBe(200);
    expect(r.body.fields.title.value).toBe('v1');
  }
  const reads1 = await readsByTarget();
  expect((reads1['0'] ?? 0) - (reads0['0'] ?? 0)).toBeGreaterThanOrEqual(40);
  // A backend reports its statistics when idle, at most once a second: wait for them.
  await waitFor('the standby to count the reads', async () => ((await standbyScans()) - before >= 40 ? true : undefined), 15_000, 250);
});

it('read-your-writes holds for 1,000 write→read pairs sent with the write\'s token', async () => {
  const reads0 = await readsByTarget();
  const LOOPS = 8;
  const PAIRS = 1_000;
  let stale = 0;
  await Promise.all(
    Array.from({ length: LOOPS }, async (_, l) => {
      let version = 0;
      for (let i = l; i < PAIRS; i += LOOPS) {
        const value = `w${i}`;
        const lsn = await put(`ryw-${l}`, value, version);
        version++;
        const r = await call('GET', `/v1/records/rep/ryw-${l}`, undefined, { 'x-kslate-min-lsn': lsn });
        expect(r.status).toBe(200);
        if (r.body.fields.title.value !== value || r.body.fields.title.version !== version) stale++;
      }
    }),
  );
  expect(stale).toBe(0);
  const reads1 = await readsByTarget();
  const standby = (reads1['0'] ?? 0) - (reads0['0'] ?? 0);
  const primary = (reads1.primary ?? 0) - (reads0.primary ?? 0);
  expect(standby + primary).toBeGreaterThanOrEqual(PAIRS);
  // The standby served a good share of them (the rest waited past --replica-wait and went to the primary).
  expect(standby).toBeGreaterThan(PAIRS / 4);
  console.log(`read-your-writes: ${standby} of the 1,000 tokened reads on the standby, ${primary} on the primary`);
}, 300_000);

it('replay paused: tokened reads stay fresh; untokened reads leave the standby once its lag passes the bound, and return after', async () => {
  const standby = cluster.standbys[0];
  await put('paused', 'p0', 0);
  await cluster.caughtUp();
  await cluster.sql(standby, 'select pg_wal_replay_pause()');
  try {
    let version = 1;
    const pausedAt = Date.now();
    // Writes keep the primary's WAL moving past what the standby has replayed.
    for (; Date.now() - pausedAt < MAX_LAG_MS + 500; ) {
      const value = `p${version}`;
      const lsn = await put('paused', value, version);
      version++;
      const r = await call('GET', '/v1/records/rep/paused', undefined, { 'x-kslate-min-lsn': lsn });
      expect(r.body.fields.title.value, 'a tokened read with replay paused').toBe(value);
    }
    // The lag bound has passed: untokened reads are the primary's, and fresh.
    await waitFor('the lag gauge to pass the bound', async () => ((await metric('svc_replica_lag_seconds', 'replica="0"')) ?? 0) > MAX_LAG_MS / 1000 ? true : undefined, 10_000, 100);
    const ready = (await (await fetch(`${gw.metricsUrl}/readyz`)).json()) as { warnings?: string[] };
    expect(ready.warnings?.join(' ')).toMatch(/Standby 0 is [\d.]+ s behind the primary/);
    const reads0 = await readsByTarget();
    for (let i = 0; i < 30; i++) {
      const r = await call('GET', '/v1/records/rep/paused');
      expect(r.body.fields.title.value).toBe(`p${version - 1}`);
    }
    const reads1 = await readsByTarget();
    expect((reads1['0'] ?? 0) - (reads0['0'] ?? 0), 'untokened reads on a standby past the lag bound').toBe(0);
    expect((reads1.primary ?? 0) - (reads0.primary ?? 0)).toBeGreaterThanOrEqual(30);
  } finally {
    await cluster.sql(standby, 'select pg_wal_replay_resume()');
  }
  await cluster.caughtUp();
  await waitFor(
    'untokened reads to use the standby again',
    async () => {
      const r0 = (await readsByTarget())['0'] ?? 0;
      await call('GET', '/v1/records/rep/paused');
      return ((await readsByTarget())['0'] ?? 0) > r0 ? true : undefined;
    },
    10_000,
    100,
  );
}, 120_000);

it('a standby killed mid-load costs no failed read, and is used again once back', async () => {
  const standby = cluster.standbys[0];
  const lsn = await put('load', 'l1', 0);
  await cluster.caughtUp();
  const failures: string[] = [];
  let reads = 0;
  let stop = false;
  const readers = Array.from({ length: 16 }, async (_, i) => {
    while (!stop) {
      const r = await call('GET', '/v1/records/rep/load', undefined, i % 2 ? { 'x-kslate-min-lsn': lsn } : {}).catch((e: Error) => ({ status: 0, body: e.message }));
      reads++;
      if (r.status !== 200) failures.push(`${r.status} ${JSON.stringify(r.body)}`);
    }
  });
  await waitFor('reads under way', () => (reads > 200 ? true : undefined), 30_000, 20);
  await cluster.kill(standby);
  const killedAt = reads;
  await waitFor('reads after the kill', () => (reads > killedAt + 500 ? true : undefined), 60_000, 50);
  expect(await metric('svc_replica_up', 'replica="0"')).toBe(0);
  // Still ready (the primary serves), saying which standby reads skip.
  const ready = await fetch(`${gw.metricsUrl}/readyz`);
  expect(ready.status).toBe(200);
  expect(((await ready.json()) as { warnings?: string[] }).warnings?.join(' ')).toMatch(/Standby 0 .*does not answer/);
  stop = true;
  await Promise.all(readers);
  expect(failures).toEqual([]);

  // Back: probed again after its backoff, and used.
  await cluster.startServer(standby);
  await waitFor('the standby to be used again', async () => ((await metric('svc_replica_up', 'replica="0"')) === 1 ? true : undefined), 30_000, 200);
  const r0 = (await readsByTarget())['0'] ?? 0;
  for (let i = 0; i < 10; i++) expect((await call('GET', '/v1/records/rep/load')).status).toBe(200);
  expect(((await readsByTarget())['0'] ?? 0) - r0).toBeGreaterThan(0);
}, 180_000);

it('one URL leading to two standbys (a read-only Service), one of them paused: tokened reads stay fresh', async () => {
  // A second standby, and a TCP round robin over both: each new connection goes to the next.
  const second = await cluster.addStandby();
  const targets = [cluster.standbys[0].port, second.port];
  let turn = 0;
  const sockets = new Set<net.Socket>();
  const proxy = net.createServer((client) => {
    const upstream = net.connect(targets[turn++ % targets.length], '127.0.0.1');
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => undefined);
    }
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
  const proxyPort = (proxy.address() as net.AddressInfo).port;
  const files = gatewayFiles('kslate-replicas-rr-', [CLASS]);
  const rr = await startGateway(
    parseConfig(
      [
        '--database-url', cluster.url(cluster.primary, 'kslate'),
        '--database-replica-url', `postgres://postgres@127.0.0.1:${proxyPort}/kslate`,
        '--allow-async-replication', 'true',
        '--listen', '127.0.0.1:0',
        '--metrics-port', '0',
        '--identity', 'apikey',
        '--apikeys', files.apikeys,
        '--classes', files.classes,
        // More connections than one: the pool's connections alternate between the two standbys.
        '--db-pool-size', '8',
      ],
      {},
    ),
    quietLog,
  );
  await cluster.caughtUp();
  await cluster.sql(cluster.standbys[0], 'select pg_wal_replay_pause()');
  try {
    let version = 0;
    let stale = 0;
    let standbyReads = 0;
    await Promise.all(
      Array.from({ length: 4 }, async (_, l) => {
        let v = 0;
        for (let i = 0; i < 50; i++) {
          const w = await fetch(`${rr.url}/v1/records/rep/rr-${l}/fields/title`, {
            method: 'PUT',
            headers: { authorization: `Bearer ${KEYS.alice}`, 'content-type': 'application/json' },
            body: JSON.stringify({ value: `rr${i}`, expected_version: v }),
          });
          expect(w.status).toBeLessThan(300);
          v++;
          version++;
          const lsn = w.headers.get('x-kslate-lsn')!;
          const r = await fetch(`${rr.url}/v1/records/rep/rr-${l}`, { headers: { authorization: `Bearer ${KEYS.alice}`, 'x-kslate-min-lsn': lsn } });
          const body = (await r.json()) as any;
          if (body.fields.title.value !== `rr${i}`) stale++;
        }
      }),
    );
    const text = await (await fetch(`${rr.metricsUrl}/metrics`)).text();
    standbyReads = Number(/^svc_db_reads_total\{target="0"\} (\S+)$/m.exec(text)?.[1] ?? 0);
    expect(version).toBe(200);
    expect(stale).toBe(0);
    // The live standby behind the same URL served some of them.
    expect(standbyReads).toBeGreaterThan(0);
  } finally {
    await cluster.sql(cluster.standbys[0], 'select pg_wal_replay_resume()');
    await rr.close();
    proxy.close();
    for (const s of sockets) s.destroy();
  }
}, 180_000);
