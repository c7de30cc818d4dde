/**
 * A real gateway for a test file: its own database, a temp class directory and key file,
 * listening on port 0; requests go over a real socket with fetch.
 */
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll } from 'vitest';
import { stringify } from 'yaml';
import type { Logger } from '../../handlers/context.js';
import type { ClassSpec } from '../../handlers/types.js';
import { parseConfig } from '../../runtime/config.js';
import { startGateway, type Gateway, type GatewayOptions } from '../../runtime/serve.js';
import { freshDatabase, type TestDb } from './db.js';

export const quietLog = process.env.KSLATE_TEST_LOG
  ? { debug() {}, info() {}, warn: (...a: unknown[]) => console.warn(...a), error: (...a: unknown[]) => console.error(...a) }
  : { debug() {}, info() {}, warn() {}, error() {} };

/** The wire timestamp: RFC 3339 with milliseconds and the server's offset (decisions §4). */
export const TS = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d\d:\d\d$/;

/** Test identities: name -> bearer token. */
export const KEYS: Record<string, string> = {
  alice: 'alice-test-key',
  bob: 'bob-test-key',
  carol: 'carol-test-key',
  dave: 'dave-test-key',
};

export interface ClassInput {
  name: string;
  namespace?: string;
  spec: ClassSpec;
}

export interface TestGateway {
  gw: Gateway;
  db: TestDb;
  url: string;
  classesDir: string;
  /** fetch as `who` (a KEYS name, or null for no Authorization header). */
  call(who: string | null, method: string, path: string, body?: unknown, headers?: Record<string, string>): Promise<{ status: number; body: any }>;
  writeClasses(classes: ClassInput[]): void;
  close(): Promise<void>;
}

/** One JSON request as `who` (a KEYS name, a raw token, or null for no Authorization header). */
export async function callAs(
  baseUrl: string,
  who: string | null,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: any }> {
  const h: Record<string, string> = { ...headers };
  if (who !== null) h.authorization = `Bearer ${KEYS[who] ?? who}`;
  let payload: string | undefined;
  if (body !== undefined) {
    payload = typeof body === 'string' ? body : JSON.stringify(body);
    h['content-type'] = 'application/json';
  }
  const res = await fetch(baseUrl + path, { method, headers: h, body: payload });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    /* keep text */
  }
  return { status: res.status, body: parsed };
}

export function manifestsYaml(classes: ClassInput[]): string {
  return classes
    .map((c) =>
      stringify({
        apiVersion: 'kslate.dev/v1',
        kind: 'SharedContext',
        metadata: { name: c.name, namespace: c.namespace ?? 'default' },
        spec: c.spec,
      }),
    )
    .join('---\n');
}

/** The test key file's YAML: every KEYS entry as its SHA-256. */
export function keyFileYaml(): string {
  return stringify({
    keys: Object.entries(KEYS).map(([name, key]) => ({ name, sha256: createHash('sha256').update(key).digest('hex') })),
  });
}

/**
 * A temp directory for a spawned `kslate serve`: `classes/` holding these classes and
 * `apikeys.yaml` holding the test keys; the caller removes `dir`.
 */
export function gatewayFiles(prefix: string, classes: ClassInput[]): { dir: string; classes: string; apikeys: string } {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  mkdirSync(join(dir, 'classes'));
  writeFileSync(join(dir, 'classes', 'classes.yaml'), manifestsYaml(classes));
  writeFileSync(join(dir, 'apikeys.yaml'), keyFileYaml());
  return { dir, classes: join(dir, 'classes'), apikeys: join(dir, 'apikeys.yaml') };
}

export interface StartOptions {
  db?: TestDb;
  extraArgs?: string[];
  log?: Logger;
  /** What the gateway changes beyond its flags (runtime/serve.ts GatewayOptions). */
  gateway?: GatewayOptions;
}

export async function startTestGateway(classes: ClassInput[], opts: StartOptions = {}): Promise<TestGateway> {
  const db = opts.db ?? (await freshDatabase());
  const dir = mkdtempSync(join(tmpdir(), 'kslate-gw-'));
  const classesDir = join(dir, 'classes');
  const keysFile = join(dir, 'apikeys.yaml');
  const writeClasses = (list: ClassInput[]) => {
    rmSync(classesDir, { recursive: true, force: true });
    mkdirSync(classesDir, { recursive: true });
    writeFileSync(join(classesDir, 'classes.yaml'), manifestsYaml(list));
  };
  writeClasses(classes);
  writeFileSync(keysFile, keyFileYaml());
  const cfg = parseConfig(
    [
      '--database-url', db.url,
      '--listen', '127.0.0.1:0',
      '--metrics-port', '0',
      '--identity', 'apikey',
      '--apikeys', keysFile,
      '--classes', classesDir,
      // KSLATE_TEST_WRITE_BATCHING=off runs a test file's gateways with coalesced writes off
      // (docs/performance.md "Coalesced writes"; on by default), unless the file sets it.
      ...(process.env.KSLATE_TEST_WRITE_BATCHING && !(opts.extraArgs ?? []).includes('--write-batching')
        ? ['--write-batching', process.env.KSLATE_TEST_WRITE_BATCHING]
        : []),
      // KSLATE_TEST_DB_POOL_SIZE=2 with batching on makes writes queue (the batcher's lanes are
      // the pool's connections) even when the test's own requests share the gateway's process.
      ...(process.env.KSLATE_TEST_DB_POOL_SIZE && !(opts.extraArgs ?? []).includes('--db-pool-size')
        ? ['--db-pool-size', process.env.KSLATE_TEST_DB_POOL_SIZE]
        : []),
      ...(opts.extraArgs ?? []),
    ],
    {},
  );
  const gw = await startGateway(cfg, opts.log ?? quietLog, opts.gateway);
  const call: TestGateway['call'] = (who, method, path, body, headers) => callAs(gw.url, who, method, path, body, headers);
  return {
    gw,
    db,
    url: gw.url,
    classesDir,
    call,
    writeClasses,
    async close() {
      await gw.close();
      if (!opts.db) await db.drop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}


/**
 * The preamble of the tests that drive a gateway and read its database directly: a gateway
 * on a fresh database started before the file's tests, a SQL client on that database, both
 * closed after. `set` hands them to the file's own variables. `opts` may be computed when the
 * gateway starts (a free gRPC port). A file's own beforeAll/afterAll registered after this
 * run after the gateway starts and before it closes.
 */
export function useGatewayWithSql(
  set: (t: TestGateway, sql: pg.Client) => void,
  classes: ClassInput[],
  opts: StartOptions | (() => Promise<StartOptions>) = {},
): void {
  let t: TestGateway | undefined;
  let sql: pg.Client | undefined;
  beforeAll(async () => {
    t = await startTestGateway(classes, typeof opts === 'function' ? await opts() : opts);
    sql = new pg.Client({ connectionString: t.db.url });
    await sql.connect();
    set(t, sql);
  }, 120_000);
  afterAll(async () => {
    await sql?.end();
    await t?.close();
  });
}

/**
 * The write batcher's statements so far (svc_write_batch_size on the gateway's metrics port):
 * how many were sent, and how many of them carried more than one write (a real batch).
 */
export async function writeBatches(t: TestGateway): Promise<{ statements: number; batches: number }> {
  const text = await (await fetch(`${t.gw.metricsUrl}/metrics`)).text();
  const num = (re: RegExp) => Number(re.exec(text)?.[1] ?? 0);
  const statements = num(/^svc_write_batch_size_count (\S+)$/m);
  return { statements, batches: statements - num(/^svc_write_batch_size_bucket\{le="1"\} (\S+)$/m) };
}
