/**
 * The Dockerfile's invariants, checked without a container engine (none runs here):
 * node:24-slim stages (the LTS line .ci/run runs the whole suite on), exec form only, production dependencies only, a non-root user before
 * the entrypoint, and every file `bin/kslate.js` reaches at run time present in the final
 * stage, with every package it imports a production dependency.
 */
import { existsSync, readFileSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { dirname, join, normalize } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, test } from 'vitest';

const root = fileURLToPath(new URL('../../', import.meta.url));
const read = (p: string) => readFileSync(join(root, p), 'utf8');
const pkg = JSON.parse(read('package.json')) as { dependencies: Record<string, string>; devDependencies: Record<string, string> };

type Instr = { op: string; args: string };
type Stage = { from: string; name?: string; instrs: Instr[] };

/** Dockerfile instructions by stage (comments dropped, continuation lines joined). */
function stages(text: string): Stage[] {
  const lines = text.replace(/\\\n/g, ' ').split('\n').map((l) => l.trim()).filter((l) => l && !l.startsWith('#'));
  const out: Stage[] = [];
  for (const line of lines) {
    const [, op, args] = /^(\S+)\s+(.*)$/.exec(line)!;
    if (op.toUpperCase() === 'FROM') {
      const [image, , name] = args.split(/\s+/);
      out.push({ from: image, name, instrs: [] });
    } else {
      out.at(-1)!.instrs.push({ op: op.toUpperCase(), args });
    }
  }
  return out;
}

const all = stages(read('Dockerfile'));
const final = all.at(-1)!;
const exec = (i: Instr) => JSON.parse(i.args) as string[];

describe('Dockerfile', () => {
  test('every stage is node:24-slim; the final stage is unnamed and runs as uid 10001', () => {
    expect(all.length).toBeGreaterThanOrEqual(2);
    for (const s of all) expect(s.from).toBe('node:24-slim');
    const ops = final.instrs.map((i) => i.op);
    const user = final.instrs.filter((i) => i.op === 'USER');
    expect(user.map((i) => i.args)).toEqual(['10001']);
    expect(ops.indexOf('USER')).toBeLessThan(ops.indexOf('ENTRYPOINT'));
    expect(final.instrs.find((i) => i.op === 'RUN' && exec(i).includes('useradd'))?.args).toMatch(/"--uid", "10001"/);
  });

  test('exec form only: RUN, CMD and ENTRYPOINT are JSON arrays', () => {
    for (const s of all) for (const i of s.instrs.filter((x) => ['RUN', 'CMD', 'ENTRYPOINT'].includes(x.op))) {
      expect(() => exec(i), `${i.op} ${i.args}`).not.toThrow();
    }
  });

  test('entrypoint is kslate, serve by default, production env, the API and metrics ports', () => {
    const get = (op: string) => final.instrs.filter((i) => i.op === op).map((i) => i.args);
    expect(exec(final.instrs.find((i) => i.op === 'ENTRYPOINT')!)).toEqual(['node', '/app/bin/kslate.js']);
    expect(exec(final.instrs.find((i) => i.op === 'CMD')!)).toEqual(['serve']);
    expect(get('ENV')).toContain('NODE_ENV=production');
    expect(get('ENV')).toContain('KSLATE_LISTEN=0.0.0.0:8080');
    expect(get('EXPOSE')).toEqual(['8080 9100']);
    expect(get('WORKDIR')).toEqual(['/app']);
  });

  test('the final stage gets production dependencies only, installed without scripts', () => {
    const from = final.instrs.find((i) => i.op === 'COPY' && /node_modules/.test(i.args))!.args;
    const stageName = /--from=(\S+)/.exec(from)![1];
    const deps = all.find((s) => s.name === stageName)!;
    const install = deps.instrs.filter((i) => i.op === 'RUN').map(exec).find((a) => a[0] === 'npm')!;
    expect(install.slice(0, 2)).toEqual(['npm', 'ci']);
    expect(install).toEqual(expect.arrayContaining(['--omit=dev', '--omit=optional', '--ignore-scripts']));
    // The build stage runs `npm ci` without `prepare` (sources are not there yet), then builds.
    const build = all.find((s) => s.name === 'build')!;
    const runs = build.instrs.filter((i) => i.op === 'RUN').map(exec);
    expect(runs[0]).toEqual(expect.arrayContaining(['npm', 'ci', '--ignore-scripts']));
    expect(runs.at(-1)).toEqual(['npm', 'run', 'build']);
  });
});

/** Relative and bare import specifiers of a TypeScript/JavaScript source (static and dynamic). */
function imports(source: string): string[] {
  const specs: string[] = [];
  for (const m of source.matchAll(/^\s*(?:import|export)\s+(?:type\s+)?(?:[^'";]*?\sfrom\s+)?['"]([^'"]+)['"]/gm)) {
    if (!/^\s*(import|export)\s+type\s/.test(m[0])) specs.push(m[1]);
  }
  for (const m of source.matchAll(/\bimport\(\s*['"]([^'"]+)['"]\s*\)/g)) specs.push(m[1]);
  return specs;
}

/** Everything bin/kslate.js loads: sources (as their .ts files) and packages. */
function runtimeClosure() {
  const files = new Set<string>();
  const packages = new Set<string>();
  const visit = (file: string) => {
    if (files.has(file)) return;
    files.add(file);
    for (const spec of imports(read(file))) {
      if (spec.startsWith('.')) {
        let target = normalize(join(dirname(file), spec));
        // bin/kslate.js imports the build output; follow it to its source.
        target = target.replace(/^dist\//, '').replace(/\.js$/, '.ts');
        // Pages written in JSX (runtime/http/ui) are .tsx sources.
        if (!existsSync(join(root, target)) && existsSync(join(root, `${target}x`))) target = `${target}x`;
        if (!existsSync(join(root, target))) throw new Error(`${file} imports ${spec}, which has no source ${target}`);
        visit(target);
      } else if (!spec.startsWith('node:') && !builtinModules.includes(spec)) {
        packages.add(spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : spec.split('/')[0]);
      }
    }
  };
  visit('bin/kslate.js');
  return { files: [...files], packages: [...packages] };
}

describe('what bin/kslate.js needs at run time is in the image', () => {
  const { files, packages } = runtimeClosure();
  const copies = final.instrs.filter((i) => i.op === 'COPY').map((i) => i.args.split(/\s+/));
  const finalPaths = copies.flatMap((a) => (a[0].startsWith('--from=') ? [] : a.slice(0, -1)));
  const fromBuild = copies.filter((a) => a[0] === '--from=build').map((a) => a[1]);
  const build = all.find((s) => s.name === 'build')!;
  const built = build.instrs.filter((i) => i.op === 'COPY').flatMap((i) => i.args.split(/\s+/).slice(0, -1));
  const buildInclude = (JSON.parse(read('tsconfig.build.json')) as { include: string[] }).include;

  test('the closure reaches the CLI, the gateway, the worker and the database code', () => {
    expect(files).toEqual(expect.arrayContaining(['runtime/main.ts', 'runtime/serve.ts', 'runtime/grpc/proto.ts', 'db/migrate.ts', 'worker/sweep.ts']));
  });

  test('compiled sources: their directory is copied into the build stage, compiled and copied out', () => {
    expect(fromBuild).toEqual(['/src/dist']);
    const dirs = [...new Set(files.filter((f) => f.endsWith('.ts')).map((f) => f.split('/')[0]))];
    expect(dirs.length).toBeGreaterThan(2);
    for (const dir of dirs) {
      expect(built, `build stage copies ${dir}/`).toContain(dir);
      expect(buildInclude, `tsconfig.build.json compiles ${dir}/`).toContain(dir);
    }
    expect(finalPaths).toContain('bin');
  });

  test('files read at run time: package.json (--version) and proto/ (gRPC)', () => {
    const sources = files.map(read).join('\n');
    expect(sources).toMatch(/new URL\('\.\.\/\.\.\/package\.json', import\.meta\.url\)/);
    expect(sources).toMatch(/PROTO_FILES = \['svc\/v1\/svc\.proto', 'google\/rpc\/status\.proto'\]/);
    expect(finalPaths).toEqual(expect.arrayContaining(['package.json', 'proto']));
    for (const p of ['proto/svc/v1/svc.proto', 'proto/google/rpc/status.proto']) expect(existsSync(join(root, p))).toBe(true);
  });

  test('every imported package is a production dependency (the image omits dev dependencies)', () => {
    expect(packages.length).toBeGreaterThan(5);
    const missing = packages.filter((p) => !(p in pkg.dependencies));
    expect(missing, `imported at run time but not in dependencies: ${missing.join(', ')}`).toEqual([]);
  });

  test('.dockerignore keeps out what the image must not carry, and nothing the Dockerfile copies', () => {
    const ignored = read('.dockerignore').split('\n').map((l) => l.trim()).filter((l) => l && !l.startsWith('#'));
    expect(ignored).toEqual(expect.arrayContaining(['node_modules', 'dist', '.cache', '.kslate', 'test', 'bench', '.git']));
    for (const path of [...finalPaths, ...built]) {
      expect(ignored.some((i) => path === i || path.startsWith(`${i}/`)), `${path} is copied but ignored`).toBe(false);
    }
  });
});
