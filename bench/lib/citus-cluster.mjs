import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../..', import.meta.url));

/** test/citus/cluster.ts, bundled next to itself (its paths are relative to it), for the Citus benches. */
export async function clusterModule(tag) {
  const { build } = await import('esbuild');
  const out = join(root, 'test', 'citus', `.${tag}-cluster.mjs`);
  await build({ entryPoints: [join(root, 'test', 'citus', 'cluster.ts')], bundle: true, platform: 'node', format: 'esm', packages: 'external', outfile: out, logLevel: 'error' });
  try {
    return await import(out);
  } finally {
    rmSync(out, { force: true });
  }
}
