/**
 * Failover under load (issue 34, docs/ha.md): a real Patroni cluster in strict synchronous mode
 * behind HAProxy (test/ha/cluster.ts), two `kslate serve` processes, 16 writers of versioned
 * puts, appends and claims. The primary is SIGKILLed, then switched over by Patroni, then
 * frozen with SIGSTOP until Patroni fails over. After each: no acknowledged write lost, no
 * version issued twice, no 500 and no hang (503 UNAVAILABLE soon, with Retry-After), writes
 * served again within 10 s of the new primary accepting them, /readyz 503 meanwhile, writes
 * of unknown outcome applied at most once, and a linearizable history of every register.
 */
import { createHash } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { manifestsYaml } from '../setup/gateway.js';
import { freePort } from '../setup/ports.js';
import { children, cleanEnv, ensureBuilt, logLines, start, stop, type Served } from '../setup/cli.js';
import { HaCluster, waitFor } from './cluster.js';
import {
  checkRun,
  haClass,
  now,
  readHistory,
  readRegister,
  RECORDS,
  WRITERS,
  writerKey,
  Workload,
  type RunReport,
} from './workload.js';

/** The gateways' --db-timeout. */
const DB_TIMEOUT_MS = 3_000;
/**
 * The longest a request may take while the database fails over: waiting for a pooled
 * connection (at most --db-timeout), then one statement (--db-timeout, and the client's own
 * bound a second later), and slack for a loaded machine.
 */
const ANSWER_WITHIN_MS = 2 * DB_TIMEOUT_MS + 4_000;
/** An answer later than this is a hang. */
const HANG_MS = 30_000;
/**
 * Write retries (issue 33): once the gateway honours Idempotency-Key, set this: writers send a
 * write of unknown outcome again with its key, and the checks require each applied exactly
 * once. Until then a write of unknown outcome is checked in the final history: applied at most
 * once, its acknowledged peers exactly once.
 */
const IDEMPOTENCY_KEYS = true;
/** The bound: writes are served again this soon after the new primary accepts them. */
const RECOVERY_MS = 10_000;

let cluster: HaCluster;
const gateways: Served[] = [];
const urls: string[] = [];

beforeAll(async () => {
  await ensureBuilt();
  cluster = await HaCluster.start({ nodes: 3 });
  await cluster.sql('create database kslate');
  await cluster.sql('create table ha_probe (at timestamptz not null)', 'kslate');
  const dir = join(cluster.dir, 'gateway');
  mkdirSync(join(dir, 'classes'), { recursive: true });
  writeFileSync(join(dir, 'classes', 'ha.yaml'), manifestsYaml([haClass]));
  writeFileSync(
    join(dir, 'apikeys.yaml'),
    stringify({
      keys: Array.from({ length: WRITERS }, (_, i) => ({ name: `w${i}`, sha256: createHash('sha256').update(writerKey(i)).digest('hex') })),
    }),
  );
  for (let g = 0; g < 2; g++) urls.push(await startGateway(cluster.url('kslate')));
  for (const url of urls) {
    const ready = await waitFor(`${url}/readyz`, async () => {
      const r = await fetch(`${url}/readyz`);
      return r.status === 200 ? await r.json() : undefined;
    }, 60_000);
    // Patroni in strict synchronous mode: the primary names a synchronous standby, so no warning.
    expect(ready).toEqual({ status: 'ready' });
  }
  // Every register starts with a value (version 1).
  for (const r of RECORDS) {
    const res = await fetch(`${urls[0]}/v1/records/ha/${r}/fields/reg`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${writerKey(0)}`, 'content-type': 'application/json' },
      body: JSON.stringify({ value: `init-${r}`, expected_version: 0 }),
    });
    expect(res.status).toBe(201);
  }
}, 600_000);

/** A `kslate serve` on `databaseUrl` with the run's classes and keys; its base URL once it listens. */
async function startGateway(databaseUrl: string): Promise<string> {
  const dir = join(cluster.dir, 'gateway');
  const port = await freePort();
  const served = await start(
    [
      'serve',
      '--database-url', databaseUrl,
      '--classes', join(dir, 'classes'),
      '--identity', 'apikey',
      '--apikeys', join(dir, 'apikeys.yaml'),
      '--listen', `127.0.0.1:${port}`,
      '--metrics-port', String(await freePort()),
      '--db-timeout', `${DB_TIMEOUT_MS}ms`,
    ],
    cleanEnv(),
    { timeoutMs: 120_000 },
  );
  gateways.push(served);
  return `http://127.0.0.1:${port}`;
}

afterAll(async () => {
  await Promise.all([...children].map((c) => stop(c).catch(() => undefined)));
  await cluster?.stop();
}, 120_000);

async function registers(): Promise<Map<string, Awaited<ReturnType<typeof readRegister>>>> {
  const m = new Map();
  for (const r of RECORDS) m.set(r, await readRegister(urls[0], writerKey(0), r));
  return m;
}

/**
 * Run the load around `failover` (which returns when the cluster has a new primary), wait for
 * writes through both gateways and a healthy cluster again, stop the load and check the run.
 */
async function underLoad(tag: string, failover: () => Promise<void>, recover: () => Promise<void>): Promise<{ report: RunReport; load: Workload; t0: number }> {
  const before = await registers();
  const load = new Workload(urls, cluster.url('kslate'), HANG_MS, tag, IDEMPOTENCY_KEYS);
  load.start();
  let t0 = 0;
  try {
    // Load first: some writes through each gateway before the failover.
    await waitFor('writes through both gateways', () => (urls.every((_, g) => load.writesOkAfter(g, 0).length >= 10) ? true : undefined), 60_000);
    t0 = now();
    await failover();
    await recover();
    // And writes through both gateways after the cluster is whole again.
    const settled = now();
    await waitFor('writes through both gateways after recovery', () => (urls.every((_, g) => load.writesOkAfter(g, settled).length >= 10) ? true : undefined), 60_000);
  } finally {
    await load.stop();
  }
  const history = new Map();
  for (const r of RECORDS) history.set(r, await readHistory(urls[0], writerKey(0), r));
  const report = checkRun(load.ops, history, before, await registers(), { answerWithinMs: ANSWER_WITHIN_MS, retryAfter: true });
  return { report, load, t0 };
}

/** The failover's own promises: writes again within RECOVERY_MS of the new primary accepting them, /readyz 503 meanwhile. */
function expectRecovery(load: Workload, t0: number): Record<string, number> {
  const accepted = load.primaryAcceptedAfter(t0);
  expect(accepted, 'the probe saw a primary accept writes after the failover').not.toBeNull();
  const numbers: Record<string, number> = { 'primary accepted writes after (ms)': Math.round(accepted! - t0) };
  urls.forEach((_, g) => {
    const first = load.writesOkAfter(g, accepted!).sort((a, b) => a.answer! - b.answer!)[0];
    expect(first, `gateway ${g} served a write after the new primary accepted writes`).toBeDefined();
    const lag = first.answer! - accepted!;
    numbers[`gateway ${g}: first write served after the new primary (ms)`] = Math.round(lag);
    expect(lag, `gateway ${g} serves writes within ${RECOVERY_MS} ms of the new primary accepting them`).toBeLessThanOrEqual(RECOVERY_MS);
    const during = load.readyz.filter((r) => r.gateway === g && r.invoke >= t0 && r.answer <= accepted!);
    expect(during.some((r) => r.status === 503), `gateway ${g}: /readyz answered 503 during the failover`).toBe(true);
    // Unavailability as a client sees it: the first 503 after t0 to the first 2xx write after it.
    const first503 = load.ops.filter((o) => o.gateway === g && o.invoke >= t0 && o.status === 503).sort((a, b) => a.answer! - b.answer!)[0];
    if (first503) {
      const back = load.writesOkAfter(g, first503.answer!).sort((a, b) => a.answer! - b.answer!)[0];
      if (back) numbers[`gateway ${g}: unavailable (first 503 to first 2xx, ms)`] = Math.round(back.answer! - first503.answer!);
    }
  });
  return numbers;
}

function expectKept(report: RunReport): void {
  // The counts say what the run exercised; the problems list must be empty. An internal fault
  // is in a gateway's log with its cause.
  console.info(JSON.stringify(report.counts));
  for (const gw of gateways) {
    const faults = logLines(gw.stdout()).filter((l) => l.level === 'error');
    if (faults.length) console.info(`${faults.length} errors logged, e.g.`, JSON.stringify(faults.slice(0, 3)));
  }
  expect(report.problems).toEqual([]);
  expect(report.counts['acknowledged writes']).toBeGreaterThan(0);
  const refused = ['put', 'append', 'claim'].reduce((n, k) => n + (report.counts[`${k} 503`] ?? 0), 0);
  expect(refused, 'writes answered 503 during the failover').toBeGreaterThan(0);
}

/** The failovers, each run under load: how the primary fails, and how its node comes back. */
const failovers: { title: string; tag: string; fail: (c: { leader: string; sync: string }) => Promise<void> | void; rejoin: (old: string) => void }[] = [
  {
    title: 'the primary is SIGKILLed (the machine dies); it rejoins as a standby',
    tag: 'kill',
    fail: ({ leader }) => cluster.kill(leader),
    rejoin: (old) => cluster.startPatroni(old),
  },
  {
    title: "Patroni's planned switchover to the synchronous standby",
    tag: 'switchover',
    fail: ({ leader, sync }) => cluster.switchover(leader, sync),
    rejoin: () => undefined,
  },
  {
    title: 'the primary is frozen (SIGSTOP) until Patroni fails over, then thawed: it rejoins as a standby',
    tag: 'freeze',
    fail: ({ leader }) => cluster.freeze(leader),
    rejoin: (old) => cluster.thaw(old),
  },
];

describe.sequential('failover under load', () => {
  for (const f of failovers) {
    it(f.title, async () => {
      let old = '';
      const { report, load, t0 } = await underLoad(
        f.tag,
        async () => {
          const healthy = await cluster.waitHealthy(60_000);
          old = healthy.leader;
          await f.fail(healthy);
          await cluster.waitForLeader(120_000, old);
        },
        async () => {
          f.rejoin(old);
          await cluster.waitHealthy(180_000);
        },
      );
      console.info(f.tag, JSON.stringify(expectRecovery(load, t0)));
      expectKept(report);
    });
  }
});

describe.sequential('a gateway given one node directly, not through HAProxy', () => {
  it('when a switchover makes its node a standby: 503 UNAVAILABLE, never 500, and /readyz names the standby', async () => {
    const { leader, sync } = await cluster.waitHealthy(120_000);
    const url = await startGateway(cluster.nodeUrl(leader, 'kslate'));
    const put = async (value: string) => {
      const reg = await readRegister(url, writerKey(1), 'r0').catch(() => null);
      const res = await fetch(`${url}/v1/records/ha/r0/fields/reg`, {
        method: 'PUT',
        headers: { authorization: `Bearer ${writerKey(1)}`, 'content-type': 'application/json' },
        body: JSON.stringify({ value, expected_version: reg?.version ?? 1 }),
        signal: AbortSignal.timeout(HANG_MS),
      });
      return { status: res.status, body: (await res.json()) as { error?: string; message?: string } };
    };
    expect((await put('direct-1')).status).toBe(200);
    await cluster.switchover(leader, sync);
    await cluster.waitForLeader(120_000, leader);
    // The old primary restarts as a standby; the gateway's connections to it end, and new ones
    // find a server in recovery.
    const answers: number[] = [];
    const ready = await waitFor('/readyz to name the standby', async () => {
      answers.push((await put(`direct-${answers.length + 2}`)).status);
      const r = await fetch(`${url}/readyz`);
      const body = (await r.json()) as { message?: string };
      return r.status === 503 && /standby/.test(body.message ?? '') ? body.message : undefined;
    }, 120_000, 250);
    expect(ready).toMatch(/connected to a standby.*--database-url must lead to the primary/);
    const onStandby = await put('on-standby');
    expect(onStandby.status).toBe(503);
    expect(onStandby.body.error).toBe('UNAVAILABLE');
    expect(answers.filter((s) => s !== 503), `answers while the node turned standby: ${answers.join(',')}`).toEqual([]);
    await cluster.waitHealthy(180_000);
  });
});
