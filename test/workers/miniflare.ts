/**
 * The Workers bundle in a real workerd (Miniflare, offline, workerd from npm): built once per
 * test run from the sources (dist-workers/index.js, rebuilt when a source is newer), started
 * with `nodejs_compat` and the bindings a test gives, on a loopback port.
 */
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, renameSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { Miniflare } from 'miniflare';
import { stringify } from 'yaml';
import { buildWorkers, OUT_DIR, OUT_FILE } from '../../scripts/build-workers.mjs';
import { ROOT } from '../setup/build.js';
import { callAs, KEYS } from '../setup/gateway.js';

/** The date wrangler.toml.example pins (Miniflare 4.20260426.0's workerd supports up to 2026-04-26). */
export const COMPATIBILITY_DATE = '2026-04-01';

/** The test key file (test/setup/gateway.ts KEYS) as the KSLATE_APIKEYS secret holds it. */
export const APIKEYS_YAML = stringify({
  keys: Object.entries(KEYS).map(([name, key]) => ({ name, sha256: createHash('sha256').update(key).digest('hex') })),
});

function newestSource(): number {
  let newest = statSync(join(ROOT, 'scripts', 'build-workers.mjs')).mtimeMs;
  for (const top of ['handlers', 'runtime', 'db', 'worker']) {
    const stack = [join(ROOT, top)];
    while (stack.length > 0) {
      const d = stack.pop()!;
      for (const e of readdirSync(d, { withFileTypes: true })) {
        const p = join(d, e.name);
        if (e.isDirectory()) stack.push(p);
        else if (e.name.endsWith('.ts')) newest = Math.max(newest, statSync(p).mtimeMs);
      }
    }
  }
  return newest;
}

/**
 * dist-workers/index.js, built unless newer than every source. Written under another name and
 * renamed, so test files building at once never read half a bundle.
 */
export async function ensureWorkersBuilt(): Promise<string> {
  if (existsSync(OUT_FILE) && statSync(OUT_FILE).mtimeMs >= newestSource()) return OUT_FILE;
  const tmp = join(OUT_DIR, `index.${process.pid}.${Date.now()}.js`);
  await buildWorkers({ outfile: tmp });
  renameSync(`${tmp}.map`, `${OUT_FILE}.map`);
  renameSync(tmp, OUT_FILE);
  return OUT_FILE;
}

export interface TestWorker {
  mf: Miniflare;
  url: string;
  /** As TestGateway.call: fetch as a KEYS name (or null: no Authorization), JSON body parsed. */
  call(who: string | null, method: string, path: string, body?: unknown, headers?: Record<string, string>): Promise<{ status: number; body: any }>;
  /** Fire the cron trigger as Cloudflare would; resolves with workerd's outcome. */
  scheduled(): Promise<{ outcome: string }>;
  close(): Promise<void>;
}

export async function startWorker(bindings: Record<string, string>): Promise<TestWorker> {
  const scriptPath = await ensureWorkersBuilt();
  const mf = new Miniflare({
    modules: true,
    scriptPath,
    compatibilityDate: COMPATIBILITY_DATE,
    compatibilityFlags: ['nodejs_compat'],
    // The access log of every request would drown the test output; warnings still show.
    bindings: { KSLATE_LOG_LEVEL: 'warn', ...bindings },
    host: '127.0.0.1',
    port: 0,
  });
  let url: string;
  try {
    url = (await mf.ready).toString().replace(/\/$/, '');
  } catch (e) {
    await mf.dispose().catch(() => undefined);
    throw new Error(`workerd (Miniflare) could not start the Workers bundle here: ${(e as Error).message}`);
  }
  return {
    mf,
    url,
    call: (who, method, path, body, headers) => callAs(url, who, method, path, body, headers),
    async scheduled() {
      // Miniflare's Fetcher type maps workers-types oddly; scheduled() is there at run time.
      const worker = (await mf.getWorker()) as unknown as {
        scheduled(o: { cron: string; scheduledTime: Date }): Promise<{ outcome: string }>;
      };
      const r = await worker.scheduled({ cron: '*/1 * * * *', scheduledTime: new Date() });
      return { outcome: r.outcome };
    },
    close: () => mf.dispose(),
  };
}
