/**
 * `kslate dev` as a new user meets it (issue 31, item 8): its banner says where every transport
 * is (the console at /ui, MCP at /mcp, gRPC or how to turn it on), and a second `kslate dev`
 * that forgot --data-dir is told the data directory is in use and which flag to pass, instead
 * of "the embedded PostgreSQL did not start".
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { children, cleanEnv, ensureBuilt, kslate, start, stop } from '../setup/cli.js';
import { freshDatabase, type TestDb } from '../setup/db.js';
import { freePort } from '../setup/ports.js';

let dataDir: string;
let d: TestDb;
beforeAll(async () => {
  await ensureBuilt();
  dataDir = mkdtempSync(join(tmpdir(), 'kslate-dev-'));
  d = await freshDatabase();
}, 180_000);
afterAll(async () => {
  await Promise.all([...children].map((c) => stop(c).catch(() => undefined)));
  await d?.drop();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

test('the banner names the console, MCP and the gRPC address; a second kslate dev on the same data directory is refused in one line naming --data-dir', async () => {
  const [port, pgPort, grpcPort] = [await freePort(), await freePort(), await freePort()];
  const first = await start(
    ['dev', '--data-dir', dataDir, '--dev-pg-port', String(pgPort), '--listen', `127.0.0.1:${port}`, '--metrics-port', '0', '--grpc-port', String(grpcPort)],
    cleanEnv(),
    { ready: /kslate dev is running[\s\S]*Try:/, timeoutMs: 120_000 },
  );
  try {
    const base = `http://127.0.0.1:${port}`;
    const banner = first.stdout();
    expect(banner).toContain(`web console  ${base}/ui`);
    expect(banner).toContain(`MCP          ${base}/mcp`);
    expect(banner).toContain(`gRPC         127.0.0.1:${grpcPort}  (svc.v1.SvcService)`);
    expect(banner).toContain(`${base}/v1/openapi.json`);
    // What the banner names answers there.
    expect((await fetch(`${base}/ui`)).status).toBeLessThan(500);

    // The second forgot --data-dir (and, worse, kept the first one's PostgreSQL port too).
    for (const pg of [String(pgPort), String(await freePort())]) {
      const second = await kslate(['dev', '--data-dir', dataDir, '--dev-pg-port', pg, '--listen', '127.0.0.1:0', '--metrics-port', '0'], cleanEnv(), 60_000);
      expect(second.code, second.stdout + second.stderr).toBe(1);
      const lines = second.stderr.trim().split('\n');
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(
        new RegExp(`^kslate: the data directory ${join(dataDir, 'pg')} is in use by another PostgreSQL \\(pid \\d+, port ${pgPort}\\), most likely another kslate dev; give this one its own with --data-dir DIR \\(KSLATE_DATA_DIR\\)`),
      );
    }
    // The first is untouched.
    expect((await fetch(`${base}/readyz`)).status).toBe(200);
  } finally {
    await stop(first.child);
  }
}, 240_000);

test('without --grpc-port the banner says gRPC is off and how to turn it on; a --database-url is shown without its password', async () => {
  const port = await freePort();
  const s = await start(['dev', '--database-url', d.url.replace('postgres://postgres@', 'postgres://postgres:hunter2@'), '--listen', `127.0.0.1:${port}`, '--metrics-port', '0'], cleanEnv(), {
    ready: /kslate dev is running[\s\S]*Try:/,
  });
  try {
    expect(s.stdout()).toContain('gRPC         off; --grpc-port PORT turns it on');
    expect(s.stdout()).toContain(`web console  http://127.0.0.1:${port}/ui`);
    expect(s.stdout()).not.toContain('hunter2');
  } finally {
    await stop(s.child);
  }
}, 120_000);
