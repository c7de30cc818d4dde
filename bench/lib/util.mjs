/**
 * Small helpers shared by the harness: ports, timing, percentiles, /proc readers.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { execFileSync } from 'node:child_process';

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** A TCP port free on loopback right now. */
export function freePort() {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      srv.close(() => resolve(addr.port));
    });
  });
}

/** Integer in [0, n). */
export const randInt = (n) => Math.floor(Math.random() * n);

/**
 * A record index owned by connection `i` of `c` among `n` records (i, i+c, i+2c, ...):
 * connections never share a record, so each knows its records' versions without reading.
 */
export function ownedIndex(i, c, n) {
  const count = Math.floor((n - 1 - i) / c) + 1;
  return i + c * randInt(count);
}

/** Latency samples in milliseconds (floats), percentiles on demand. */
export class Latencies {
  constructor() {
    this.buf = new Float64Array(1 << 16);
    this.n = 0;
  }
  push(ms) {
    if (this.n === this.buf.length) {
      const next = new Float64Array(this.buf.length * 2);
      next.set(this.buf);
      this.buf = next;
    }
    this.buf[this.n++] = ms;
  }
  summary() {
    const a = this.buf.slice(0, this.n).sort();
    const pct = (p) => (a.length === 0 ? null : a[Math.min(a.length - 1, Math.max(0, Math.ceil((p / 100) * a.length) - 1))]);
    let sum = 0;
    for (const v of a) sum += v;
    return {
      count: a.length,
      p50: pct(50),
      p90: pct(90),
      p99: pct(99),
      max: a.length ? a[a.length - 1] : null,
      mean: a.length ? sum / a.length : null,
    };
  }
}

export const round = (x, d = 2) => (x === null || x === undefined || Number.isNaN(x) ? null : Math.round(x * 10 ** d) / 10 ** d);

let clkTck = 100;
try {
  clkTck = Number(execFileSync('getconf', ['CLK_TCK']).toString().trim()) || 100;
} catch {
  /* keep 100 */
}

/** utime+stime (+ reaped children's) of one process, in seconds; null when it is gone. */
function procCpu(pid, withChildren) {
  try {
    const s = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const rest = s.slice(s.lastIndexOf(')') + 2).split(' ');
    // rest[0] is field 3 (state): utime=14, stime=15, cutime=16, cstime=17 (1-based).
    let ticks = Number(rest[11]) + Number(rest[12]);
    if (withChildren) ticks += Number(rest[13]) + Number(rest[14]);
    return ticks / clkTck;
  } catch {
    return null;
  }
}

/** [pid, ppid, comm] of every process. */
function processes() {
  const out = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const s = readFileSync(`/proc/${name}/stat`, 'utf8');
      const comm = s.slice(s.indexOf('(') + 1, s.lastIndexOf(')'));
      const rest = s.slice(s.lastIndexOf(')') + 2).split(' ');
      out.push({ pid: Number(name), ppid: Number(rest[1]), comm });
    } catch {
      /* gone */
    }
  }
  return out;
}

/**
 * CPU seconds used so far by PostgreSQL: the postmaster (with its reaped backends) and its
 * live children when the postmaster pid is known, else every process named postgres.
 */
export function postgresCpu(postmasterPid) {
  let total = 0;
  for (const p of processes()) {
    if (postmasterPid ? p.pid === postmasterPid : p.comm === 'postgres') {
      total += procCpu(p.pid, true) ?? 0;
    } else if (postmasterPid && p.ppid === postmasterPid) {
      total += procCpu(p.pid, false) ?? 0;
    }
  }
  return total;
}

export function processCpu(pid) {
  return procCpu(pid, false);
}

/** VmRSS of a process in MiB, null when it is gone. */
export function rssMb(pid) {
  try {
    const m = /VmRSS:\s+(\d+)\s+kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : null;
  } catch {
    return null;
  }
}

/** Machine-wide CPU seconds so far (all cores): busy (user..steal, without idle/iowait), irq+softirq, steal. */
export function machineCpu() {
  try {
    const line = readFileSync('/proc/stat', 'utf8').split('\n')[0];
    const [user, nice, system, , , irq, softirq, steal] = line.trim().split(/\s+/).slice(1).map(Number);
    return { busy: (user + nice + system + irq + softirq + steal) / clkTck, irq: (irq + softirq) / clkTck, steal: steal / clkTck };
  } catch {
    return { busy: 0, irq: 0, steal: 0 };
  }
}
