/**
 * Summarise a V8 .cpuprofile (node --cpu-prof): self time per function and per package.
 */
import { readdirSync, readFileSync } from 'node:fs';

function where(url) {
  if (!url) return '(native/vm)';
  if (url.startsWith('node:')) return 'node internals';
  const nm = url.lastIndexOf('/node_modules/');
  if (nm >= 0) {
    const rest = url.slice(nm + 14).split('/');
    return rest[0].startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0];
  }
  const dist = url.indexOf('/dist/');
  if (dist >= 0) return 'kslate ' + url.slice(dist + 6).split('/')[0];
  return url;
}

export function summarizeProfile(file, top = 25) {
  const prof = JSON.parse(readFileSync(file, 'utf8'));
  const byId = new Map(prof.nodes.map((n) => [n.id, n]));
  const self = new Map();
  const deltas = prof.timeDeltas ?? [];
  let total = 0;
  prof.samples.forEach((id, i) => {
    const dt = deltas[i] ?? 0;
    total += dt;
    self.set(id, (self.get(id) ?? 0) + dt);
  });
  const fn = new Map();
  const pkg = new Map();
  for (const [id, us] of self) {
    const n = byId.get(id);
    const cf = n.callFrame;
    const name = cf.functionName || '(anonymous)';
    const file = cf.url ? cf.url.replace(/^file:\/\//, '') : '';
    const key = `${name} ${file ? file.replace(/^.*\/(node_modules|dist)\//, '$1/') + ':' + (cf.lineNumber + 1) : ''}`.trim();
    fn.set(key, (fn.get(key) ?? 0) + us);
    const p = ['(idle)', '(program)', '(garbage collector)'].includes(name) ? name : where(cf.url);
    pkg.set(p, (pkg.get(p) ?? 0) + us);
  }
  const pct = (us) => Math.round((us / total) * 1000) / 10;
  const sorted = (m) => [...m].sort((a, b) => b[1] - a[1]);
  return {
    file,
    seconds: Math.round(total / 1e4) / 100,
    by_package: sorted(pkg).slice(0, 20).map(([k, us]) => ({ where: k, self_pct: pct(us) })),
    top_functions: sorted(fn).slice(0, top).map(([k, us]) => ({ fn: k, self_pct: pct(us) })),
  };
}

/** The summary of the newest .cpuprofile in `dir` (a gateway run under --cpu-prof), or null without one. */
export function summarizeLatestProfile(dir, top = 40) {
  const file = readdirSync(dir).filter((f) => f.endsWith('.cpuprofile')).sort().pop();
  return file ? summarizeProfile(`${dir}/${file}`, top) : null;
}
