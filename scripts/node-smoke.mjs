/**
 * `node scripts/node-smoke.mjs`: does kslate start and write on the Node.js running this
 * script? .ci/run runs it under each LTS line the whole suite does not run on
 * (scripts/node-lts.sh). It starts `kslate dev` (bin/kslate.js, from dist/) under the same
 * `node` with a fresh embedded PostgreSQL in a temporary directory, waits until it answers,
 * PUTs a field as alice (examples/apikeys.yaml), GETs it back, and stops it with SIGTERM,
 * which must end it with status 0. Prints one line; any failure exits 1 with the gateway's
 * output.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const START_MS = 180_000;
const STOP_MS = 60_000;
const AUTH = { authorization: 'Bearer alice-dev-key' };

function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

/** Calls `probe` until it returns something other than undefined, or fails at the deadline. */
async function until(what, ms, probe) {
  const deadline = Date.now() + ms;
  for (;;) {
    const got = await probe();
    if (got !== undefined) return got;
    if (Date.now() > deadline) throw new Error(`${what} did not happen within ${ms / 1000}s`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

const dataDir = mkdtempSync(join(tmpdir(), 'kslate-smoke-'));
const [port, pgPort, metricsPort] = [await freePort(), await freePort(), await freePort()];
const url = `http://127.0.0.1:${port}`;
// Only the flags below count: no KSLATE_* variable of the caller's environment.
const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('KSLATE_')));
const args = ['bin/kslate.js', 'dev', '--data-dir', dataDir, '--listen', `127.0.0.1:${port}`, '--dev-pg-port', String(pgPort), '--metrics-port', String(metricsPort)];
const child = spawn(process.execPath, args, { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
let output = '';
child.stdout.on('data', (d) => (output += d));
child.stderr.on('data', (d) => (output += d));
let exit;
const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve((exit = { code, signal }))));

const started = Date.now();
try {
  await until('kslate dev answering', START_MS, async () => {
    if (exit) throw new Error(`kslate dev exited (${exit.code ?? exit.signal}) before it answered`);
    const res = await fetch(`${url}/v1/classes`, { headers: AUTH }).catch(() => undefined);
    return res?.status === 200 ? true : undefined;
  });
  const startedIn = ((Date.now() - started) / 1000).toFixed(1);
  const title = `smoke on node ${process.version}`;
  const put = await fetch(`${url}/v1/records/incident/node-smoke/fields/title`, {
    method: 'PUT',
    headers: { ...AUTH, 'content-type': 'application/json' },
    body: JSON.stringify({ value: title, expected_version: 0 }),
  });
  if (put.status !== 201) throw new Error(`PUT answered ${put.status}: ${await put.text()}`);
  const get = await fetch(`${url}/v1/records/incident/node-smoke`, { headers: AUTH });
  const record = await get.json();
  if (get.status !== 200 || record.fields?.title?.value !== title) {
    throw new Error(`GET answered ${get.status}: ${JSON.stringify(record)}, not the title just written`);
  }
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), STOP_MS);
  const { code, signal } = await exited;
  clearTimeout(timer);
  if (code !== 0) throw new Error(`kslate dev stopped with ${code ?? signal} after SIGTERM, not 0`);
  console.log(`node ${process.version}: kslate dev started in ${startedIn}s, PUT 201, GET read it back, SIGTERM exit 0`);
} catch (e) {
  if (!exit) child.kill('SIGKILL');
  await exited;
  console.error(`node ${process.version}: smoke failed: ${e instanceof Error ? e.message : e}\n--- kslate dev output ---\n${output}`);
  process.exitCode = 1;
} finally {
  rmSync(dataDir, { recursive: true, force: true });
}
