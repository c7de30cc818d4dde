/**
 * `npm run build:workers`: bundles the Workers adapter (runtime/workers/index.ts) into
 * dist-workers/index.js, one ES module for workerd with `nodejs_compat`.
 *
 * - Conditions `workerd`, `worker`, `browser`: packages pick their Workers builds (pg's
 *   socket layer `pg-cloudflare` resolves to `cloudflare:sockets` only under `workerd`).
 * - `node:*` and `cloudflare:*` stay imports, served by workerd; a bare built-in name that a
 *   CommonJS dependency requires (`events`, `net`, ...) becomes its `node:` form.
 * - The `createRequire` banner (from '/': workerd has no import.meta.url) gives esbuild's CommonJS wrappers (pg, pg-pool, ...) a
 *   `require` for those built-ins.
 *
 * Prints the output's size; with `--meta` also writes dist-workers/meta.json (esbuild's
 * metafile, what pulled in what).
 */
import { builtinModules } from 'node:module';
import { mkdirSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
export const OUT_DIR = `${ROOT}dist-workers`;
export const OUT_FILE = `${OUT_DIR}/index.js`;

const builtins = new Set(builtinModules.filter((m) => !m.startsWith('_')));

/** @type {import('esbuild').Plugin} */
const runtimeModules = {
  name: 'workerd-runtime-modules',
  setup(b) {
    b.onResolve({ filter: /^(node|cloudflare):/ }, (args) => ({ path: args.path, external: true }));
    b.onResolve({ filter: /^[a-z_]+(\/[a-z_]+)?$/ }, (args) =>
      builtins.has(args.path) ? { path: `node:${args.path}`, external: true } : undefined,
    );
  },
};

/** Builds the bundle (into `outfile`, default dist-workers/index.js); resolves with esbuild's metafile. */
export async function buildWorkers({ meta = false, outfile = OUT_FILE } = {}) {
  mkdirSync(OUT_DIR, { recursive: true });
  const result = await build({
    entryPoints: [`${ROOT}runtime/workers/index.ts`],
    outfile,
    bundle: true,
    format: 'esm',
    platform: 'neutral',
    target: 'es2022',
    conditions: ['workerd', 'worker', 'browser'],
    mainFields: ['module', 'main'],
    plugins: [runtimeModules],
    // workerd leaves import.meta.url undefined; any absolute path will do for built-ins.
    banner: { js: "import { createRequire as __kslateCreateRequire } from 'node:module';\nconst require = __kslateCreateRequire('/');" },
    sourcemap: true,
    metafile: true,
    logLevel: 'warning',
    legalComments: 'none',
  });
  if (meta) writeFileSync(`${OUT_DIR}/meta.json`, JSON.stringify(result.metafile));
  return result.metafile;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const metafile = await buildWorkers({ meta: process.argv.includes('--meta') });
  const out = Object.entries(metafile.outputs).find(([f]) => f.endsWith('index.js'));
  console.log(`dist-workers/index.js: ${Math.round((out?.[1].bytes ?? 0) / 1024)} KiB`);
}
