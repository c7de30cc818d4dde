/**
 * @kubernetes/client-node costs a process about 80 MB of RSS (its generated models), so the
 * gateway loads it only when it needs the cluster: the k8s-sa identity provider, or the
 * worker's class source and role mirror; grpc-js (~20 MB) only when --grpc-port is set.
 * Nothing `kslate serve` imports statically (value imports; `import type` is erased) may
 * reach them; those modules are `await import()`ed. `kslate serve` is runtime/main.ts and the
 * gateway it loads for the command (runtime/serve.ts; main loads each command's modules when
 * it runs, so `kslate help` loads none of them).
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { expect, test } from 'vitest';

const ROOT = join(import.meta.dirname, '../..');

/** Value imports of one source file: relative targets (as .ts/.tsx paths) and package names. */
function valueImports(rel: string): { files: string[]; packages: string[] } {
  const src = readFileSync(join(ROOT, rel), 'utf8');
  const files: string[] = [];
  const packages: string[] = [];
  for (const m of src.matchAll(/^\s*(?:import|export)\s+(?!type\s)(?:[^'"]*?\sfrom\s+)?['"]([^'"]+)['"]/gm)) {
    const spec = m[1]!;
    if (!spec.startsWith('.')) {
      packages.push(spec);
      continue;
    }
    const base = join(dirname(rel), spec).replace(/\.js$/, '');
    const found = ['.ts', '.tsx'].map((x) => base + x).find((p) => existsSync(join(ROOT, p)));
    if (found) files.push(found);
  }
  return { files, packages };
}

/** What `kslate serve` loads before it serves: the CLI, then the gateway (dynamically imported by the CLI). */
const SERVE_ROOTS = ['runtime/main.ts', 'runtime/serve.ts'];

/** Paths from `kslate serve`'s modules, over static value imports, to a file importing a matching package. */
function staticPathsTo(pkg: RegExp): { seen: number; offenders: string[] } {
  const seen = new Set<string>();
  const offenders: string[] = [];
  const visit = (rel: string, path: string[]) => {
    if (seen.has(rel)) return;
    seen.add(rel);
    const { files, packages } = valueImports(rel);
    if (packages.some((p) => pkg.test(p))) offenders.push([...path, rel].join(' -> '));
    for (const f of files) visit(f, [...path, rel]);
  };
  for (const root of SERVE_ROOTS) visit(root, []);
  return { seen: seen.size, offenders };
}

test('kslate serve loads @kubernetes/client-node only on demand (dynamic import)', () => {
  const { seen, offenders } = staticPathsTo(/^@kubernetes\//);
  expect(seen).toBeGreaterThan(20); // the walk really followed the gateway's imports
  expect(offenders).toEqual([]);
});

test('kslate serve loads grpc-js only when gRPC is on (--grpc-port, off by default)', () => {
  expect(staticPathsTo(/^@grpc\//).offenders).toEqual([]);
});

test('kslate help loads no gateway: runtime/main.ts imports serve.ts only when the command runs', () => {
  const main = readFileSync(join(ROOT, 'runtime/main.ts'), 'utf8');
  expect(valueImports('runtime/main.ts').files).not.toContain('runtime/serve.ts');
  expect(main).toContain("import('./serve.js')");
});

test('the walk sees a static client-node import where there is one', () => {
  expect(valueImports('runtime/k8s/cluster.ts').packages).toContain('@kubernetes/client-node');
});
