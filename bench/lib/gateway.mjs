/**
 * The gateway under test: `node bin/kslate.js serve` as a child process, with a class manifest
 * directory and a key file written to a temp dir, plus an RSS sampler (VmRSS every 200 ms).
 */
import { execFileSync, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse, stringify } from 'yaml';
import { CLASS, FIELDS, QCLASS, STATUSES } from './db.mjs';
import { freePort, rssMb, sleep } from './util.mjs';

export const tokenOf = (i) => `bench-key-${i}`;
export const authOf = (i) => `Bearer ${tokenOf(i)}`;

/** Write the classes and keys for `identities` agents (apikey:bench-0 ...). */
export function writeConfig(identities, { extra = [] } = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'kslate-bench-gw-'));
  const classesDir = join(dir, 'classes');
  mkdirSync(classesDir);
  const subjects = Array.from({ length: identities }, (_, i) => `apikey:bench-${i}`);
  // Service accounts of namespace `bench` too, for bench/identity.mjs (k8s-sa against API keys).
  const roles = { agent: { subjects: [...subjects, 'k8s-sa:bench/*'], read: ['*'], write: ['*'] } };
  const manifests = [
    {
      name: CLASS,
      spec: {
        fields: { ...Object.fromEntries(FIELDS.map((f) => [f, { kind: 'versioned' }])), job: { kind: 'task' } },
        roles,
      },
    },
    {
      name: QCLASS,
      spec: {
        fields: { team: { kind: 'versioned', type: 'string' }, status: { kind: 'versioned', type: 'string', enum: STATUSES } },
        roles,
      },
    },
    // Classes of one bench only (bench/durability.mjs); each gets the agents' role.
    ...extra.map((m) => ({ name: m.name, spec: { ...m.spec, roles } })),
  ];
  writeFileSync(
    join(classesDir, 'bench.yaml'),
    manifests
      .map((m) => stringify({ apiVersion: 'kslate.dev/v1', kind: 'SharedContext', metadata: { name: m.name, namespace: 'bench' }, spec: m.spec }))
      .join('---\n'),
  );
  const keysFile = join(dir, 'apikeys.yaml');
  writeFileSync(
    keysFile,
    stringify({
      keys: subjects.map((_, i) => ({ name: `bench-${i}`, sha256: createHash('sha256').update(tokenOf(i)).digest('hex') })),
    }),
  );
  return { dir, classesDir, keysFile, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** The environment without KSLATE_* variables: only the flags below configure the gateway. */
function cleanEnv() {
  const env = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('KSLATE_')) env[k] = v;
  return env;
}

/** The chart's gateway values (chart/values.yaml), so the bench runs the gateway as it is deployed. */
function chartValues(root) {
  return parse(readFileSync(join(root, 'chart', 'values.yaml'), 'utf8'))?.gateway ?? {};
}

/**
 * The V8 flags the chart gives the gateway by default (gateway.maxHeapMB,
 * gateway.maxSemiSpaceMB, which the deployment puts in NODE_OPTIONS). Without a heap limit Node
 * sizes the heap from the machine's memory and V8 lets it grow to several times what survives
 * a collection.
 */
function chartNodeArgs(g) {
  return [
    ...(g.maxHeapMB ? [`--max-old-space-size=${Number(g.maxHeapMB)}`] : []),
    ...(g.maxSemiSpaceMB ? [`--max-semi-space-size=${Number(g.maxSemiSpaceMB)}`] : []),
  ];
}

/**
 * Spawn `kslate serve` and wait for its `listening` log line and /readyz.
 * opts: { root, databaseUrl, classesDir, keysFile, grpc (bool), profileDir, say, extraArgs (more flags),
 *   nodeDefaults (bool: Node's V8 defaults instead of the chart's flags) }
 */
export async function startGateway(opts) {
  const port = await freePort();
  const metricsPort = await freePort();
  const grpcPort = opts.grpc ? await freePort() : 0;
  const chart = chartValues(opts.root);
  // The heap flags: as deployed (the chart's NODE_OPTIONS) unless `nodeDefaults` asks for
  // Node's own, then experiments (e.g. KSLATE_BENCH_NODE_ARGS="--max-semi-space-size=8"; the
  // last of a flag wins).
  const v8Flags = [
    ...(opts.nodeDefaults ? [] : chartNodeArgs(chart)),
    ...(process.env.KSLATE_BENCH_NODE_ARGS ? process.env.KSLATE_BENCH_NODE_ARGS.split(/\s+/).filter(Boolean) : []),
  ];
  const nodeArgs = [
    ...(opts.profileDir ? ['--cpu-prof', '--cpu-prof-dir', opts.profileDir] : []),
    ...(opts.traceGc ? ['--trace-gc'] : []),
    ...v8Flags,
  ];
  const args = [
    ...nodeArgs,
    join(opts.root, 'bin', 'kslate.js'),
    'serve',
    '--database-url', opts.databaseUrl,
    '--classes', opts.classesDir,
    ...(opts.identityArgs ?? ['--identity', 'apikey']),
    '--apikeys', opts.keysFile,
    '--listen', `127.0.0.1:${port}`,
    '--metrics-port', String(metricsPort),
    ...(grpcPort ? ['--grpc-port', String(grpcPort)] : []),
    '--log-level', 'info',
    // The chart's request pool size when it sets one (0: the gateway's default).
    ...(chart.dbPoolSize ? ['--db-pool-size', String(chart.dbPoolSize)] : []),
    // The load comes from this one address, as many clients as a scenario wants: no per-address cap.
    '--max-conns-per-address', '0',
    ...(opts.extraArgs ?? []),
  ];
  const child = spawn(process.execPath, args, { cwd: opts.root, env: { ...cleanEnv(), ...(opts.env ?? {}) }, stdio: ['ignore', 'pipe', 'pipe'] });
  const tail = [];
  // With --trace-gc: every V8 collection of the gateway, as { at (performance.now()), kind, ms,
  // heapMb, committedMb (the V8 heap used and committed after it) }.
  const gcEvents = [];
  // e.g. "Scavenge 45.1 (60.3) -> 30.2 (62.3) MB, 1.25 / 0.00 ms": the heap used (committed) after it.
  const GC_LINE = /(Scavenge|Mark-Compact|Mark-Sweep|Minor Mark-Sweep)[^,]*?-> ([\d.]+) \(([\d.]+)\) MB, ([\d.]+) \/ ([\d.]+) ms/;
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
  const listening = new Promise((resolve, reject) => {
    let buf = '';
    child.stdout.on('data', (d) => {
      buf += d;
      let nl;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        const gc = opts.traceGc ? GC_LINE.exec(line) : null;
        if (gc) {
          gcEvents.push({ at: performance.now(), kind: gc[1], ms: Number(gc[4]), heapMb: Number(gc[2]), committedMb: Number(gc[3]), reason: line.slice(line.lastIndexOf(')') + 1).trim() });
          continue;
        }
        keep(line);
        if (/listening/.test(line)) resolve(line);
      }
    });
    child.stderr.on('data', (d) => keep(String(d).trimEnd()));
    exitPromise.then((e) => reject(new Error(`kslate serve exited (${e.code ?? e.signal}) before listening:\n${tail.join('\n')}`)));
    setTimeout(() => reject(new Error(`kslate serve did not log "listening" within 60 s:\n${tail.join('\n')}`)), 60_000).unref();
  });
  await listening;
  if (opts.nice !== undefined) {
    // Diagnostic: the gateway is one thread among dozens of PostgreSQL backends on 2 cores.
    try {
      execFileSync('renice', ['-n', String(opts.nice), '-p', String(child.pid)]);
    } catch (e) {
      throw new Error(`renice ${opts.nice} failed (needs root for negative values): ${e.message}`);
    }
  }
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; ; i++) {
    const ok = await fetch(`${url}/readyz`).then((r) => r.ok, () => false);
    if (ok) break;
    if (i > 100) throw new Error('kslate serve never became ready');
    await sleep(100);
  }
  const sampler = new RssSampler(child.pid);
  return {
    url,
    port,
    grpcPort,
    pid: child.pid,
    /** The V8 flags it runs with (the chart's, then KSLATE_BENCH_NODE_ARGS). */
    v8Flags,
    sampler,
    tail,
    gcEvents,
    get exited() {
      return exited;
    },
    async stop() {
      sampler.stop();
      if (exited) return exited;
      child.kill('SIGTERM');
      const t = setTimeout(() => child.kill('SIGKILL'), 15_000);
      const e = await exitPromise;
      clearTimeout(t);
      return e;
    },
  };
}

/** Peak VmRSS of a process, overall and per window (one window per scenario). */
export class RssSampler {
  constructor(pid, everyMs = 200) {
    this.pid = pid;
    this.peak = 0;
    this.windowPeak = 0;
    this.last = 0;
    this.sample();
    this.timer = setInterval(() => this.sample(), everyMs);
    this.timer.unref();
  }
  sample() {
    const mb = rssMb(this.pid);
    if (mb === null) return;
    this.last = mb;
    if (mb > this.peak) this.peak = mb;
    if (mb > this.windowPeak) this.windowPeak = mb;
  }
  beginWindow() {
    this.sample();
    this.windowPeak = this.last;
  }
  endWindow() {
    this.sample();
    return this.windowPeak;
  }
  stop() {
    clearInterval(this.timer);
  }
}

export const grpcServerBuilt = (root) => existsSync(join(root, 'dist', 'runtime', 'grpc', 'server.js'));
export const mcpServerBuilt = (root) => existsSync(join(root, 'dist', 'runtime', 'http', 'mcp', 'server.js'));
