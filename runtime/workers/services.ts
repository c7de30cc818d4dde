/**
 * The Workers adapter's services: what `AppServices` asks for (runtime/request.ts), built from
 * `env`. Two lifetimes:
 *
 * - per isolate (module scope, rebuilt when the env values change): the identity providers
 *   (API keys parsed from the KSLATE_APIKEYS secret; OIDC with its key set cached here), the
 *   rejected-credential budget (per isolate, so per Cloudflare location and instance, not
 *   global), the logger, and data caches (class rows, the cursor key);
 * - per request: the database pool and everything bound to it (the Db port, the class
 *   registry's loads, readiness). Workers cannot carry a socket, or a promise waiting on one,
 *   from one request to the next.
 *
 * Metrics are no-ops: Workers have no port to scrape; use Workers Analytics and Logs.
 */
import { parseAllDocuments } from 'yaml';
import type pg from 'pg';
import { PgDb } from '../../db/kysely/index.js';
import { replicationRisk } from '../../db/kysely/primary.js';
import { classifyDbError } from '../../db/errors.js';
import { schemaVersion, SCHEMA_VERSION } from '../../db/migrate.js';
import type { ClassRow } from '../../db/port.js';
import { cachedRegistry } from '../../handlers/class-registry.js';
import { parseDuration, parseManifest } from '../../handlers/class-schema.js';
import { noopMetrics, type Logger } from '../../handlers/context.js';
import type { ClassManifest, IdentityProvider } from '../../handlers/types.js';
import type { ClassSource } from '../../worker/reconcile-classes.js';
import { StaticApiKeyProvider } from '../identity/apikey-keys.js';
import { OidcProvider } from '../identity/oidc.js';
import { RejectedCredentialBudget } from '../rate-limit.js';
import type { AppServices } from '../request.js';
import type { WorkersEnv } from './env.js';
import { consoleLogger } from './log.js';

/** How long class rows read by one request serve the next ones (as the Node gateway's registry). */
const CLASS_CACHE_MS = 1_000;
/** How long /readyz waits for the database before answering 503. */
const READY_TIMEOUT_MS = 2_000;

/** What outlives a request. */
export interface Isolate {
  log: Logger;
  providers: IdentityProvider[];
  budget: RejectedCredentialBudget;
  dbTimeoutMs: number;
  sweepBudgetMs: number | undefined;
  /** KSLATE_ALLOW_ASYNC_REPLICATION: no warning about a primary without a synchronous standby. */
  allowAsyncReplication: boolean;
  /** The replication risk last logged (docs/ha.md), so a change is logged once per isolate. */
  replicationRisk: string | null;
  classSource: (() => Promise<ClassSource>) | undefined;
  /** Class rows as last read, shared by the requests of this isolate for CLASS_CACHE_MS. */
  classRows: { rows: ClassRow[]; at: number } | null;
  cursorKey: string | null;
}

/** The adapter cannot start as configured; every request answers 503 with this message. */
export class WorkersConfigError extends Error {}

let cached: { key: string; isolate: Isolate } | null = null;

/**
 * The isolate's services for `env`, built on first use and again only when a value changed.
 * Concurrent first requests may each build one (the last kept): cheaper than sharing a
 * promise across requests, which Workers do not allow to resolve from another request.
 */
export async function isolateFor(env: WorkersEnv): Promise<Isolate> {
  const key = JSON.stringify(Object.entries(env).map(([k, v]) => [k, typeof v === 'string' ? v : (v as { connectionString?: string })?.connectionString]));
  if (cached?.key === key) return cached.isolate;
  const isolate = await buildIsolate(env);
  cached = { key, isolate };
  return isolate;
}

async function buildIsolate(env: WorkersEnv): Promise<Isolate> {
  const log = consoleLogger(env.KSLATE_LOG_LEVEL);
  return {
    log,
    providers: await createProviders(env, log),
    budget: new RejectedCredentialBudget(),
    dbTimeoutMs: duration(env.KSLATE_DB_TIMEOUT, 'KSLATE_DB_TIMEOUT') ?? 10_000,
    sweepBudgetMs: duration(env.KSLATE_SWEEP_BUDGET, 'KSLATE_SWEEP_BUDGET'),
    allowAsyncReplication: flag(env.KSLATE_ALLOW_ASYNC_REPLICATION, 'KSLATE_ALLOW_ASYNC_REPLICATION'),
    replicationRisk: null,
    classSource: env.KSLATE_CLASSES ? () => Promise.resolve(classesFromText(env.KSLATE_CLASSES!)) : undefined,
    classRows: null,
    cursorKey: null,
  };
}

function flag(v: string | undefined, name: string): boolean {
  if (v === undefined || v === '' || v === 'false') return false;
  if (v === 'true') return true;
  throw new WorkersConfigError(`${name} is "${v}"; give true or false.`);
}

function duration(v: string | undefined, name: string): number | undefined {
  if (v === undefined || v === '') return undefined;
  const ms = parseDuration(v);
  if (ms === null || ms <= 0) throw new WorkersConfigError(`${name} is "${v}"; give a duration such as 10s.`);
  return ms;
}

async function createProviders(env: WorkersEnv, log: Logger): Promise<IdentityProvider[]> {
  const kinds = (env.KSLATE_IDENTITY ?? 'apikey').split(',').map((k) => k.trim()).filter(Boolean);
  const providers: IdentityProvider[] = [];
  for (const kind of kinds) {
    if (kind === 'apikey') {
      if (!env.KSLATE_APIKEYS) {
        throw new WorkersConfigError('KSLATE_IDENTITY includes apikey but the secret KSLATE_APIKEYS is not set: `wrangler secret put KSLATE_APIKEYS < apikeys.yaml`.');
      }
      try {
        providers.push(StaticApiKeyProvider.fromText(env.KSLATE_APIKEYS, '(secret KSLATE_APIKEYS)'));
      } catch (e) {
        throw new WorkersConfigError((e as Error).message);
      }
    } else if (kind === 'oidc') {
      if (!env.KSLATE_OIDC_ISSUER) throw new WorkersConfigError('KSLATE_IDENTITY includes oidc but KSLATE_OIDC_ISSUER is not set.');
      if (!env.KSLATE_OIDC_AUDIENCE) throw new WorkersConfigError('KSLATE_IDENTITY includes oidc but KSLATE_OIDC_AUDIENCE is not set.');
      providers.push(
        await OidcProvider.open(
          {
            issuer: env.KSLATE_OIDC_ISSUER,
            audience: env.KSLATE_OIDC_AUDIENCE,
            jwksUrl: env.KSLATE_OIDC_JWKS_URL || undefined,
            usernameClaim: env.KSLATE_OIDC_USERNAME_CLAIM || 'sub',
          },
          log,
        ),
      );
    } else if (kind === 'k8s-sa') {
      throw new WorkersConfigError(
        'KSLATE_IDENTITY includes k8s-sa, which Workers cannot offer (no cluster to review tokens with); use apikey and/or oidc, or run the Node gateway in the cluster.',
      );
    } else {
      throw new WorkersConfigError(`Unknown identity provider "${kind}" in KSLATE_IDENTITY; use apikey and/or oidc on Workers.`);
    }
  }
  if (providers.length === 0) throw new WorkersConfigError('KSLATE_IDENTITY names no provider; use apikey.');
  return providers;
}

/** The request's services over its own pool. */
export function requestServices(iso: Isolate, pool: pg.Pool): AppServices {
  const db = new PgDb(pool);
  const classes = cachedRegistry(async () => {
    const c = iso.classRows;
    if (c && Date.now() - c.at < CLASS_CACHE_MS) return c.rows;
    const rows = await db.listClasses();
    iso.classRows = { rows, at: Date.now() };
    return rows;
  }, () => Date.now());
  return {
    db,
    classes,
    metrics: noopMetrics,
    log: iso.log,
    providers: iso.providers,
    budget: iso.budget,
    readiness: { check: () => readiness(iso, pool) },
    // The client address is cf-connecting-ip, set by Cloudflare's edge; X-Forwarded-For is the client's to forge.
    trustProxy: 0,
    newId: () => crypto.randomUUID(),
    async cursorKey() {
      if (iso.cursorKey === null) {
        const k = await db.meta('cursor_key');
        if (!k) throw new Error('cursor_key missing from kslate_meta; run `kslate migrate` against this database');
        iso.cursorKey = k;
      }
      return iso.cursorKey;
    },
  };
}

/** /readyz on Workers: never applies the schema, only says to. */
async function readiness(iso: Isolate, pool: pg.Pool): Promise<{ ready: true; warnings?: string[] } | { ready: false; message: string }> {
  const other = iso.providers.map((p) => p.notReady?.() ?? null).find((m) => m !== null);
  if (other) return { ready: false, message: other };
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<null>((resolve) => (timer = setTimeout(() => resolve(null), READY_TIMEOUT_MS)));
  try {
    // The replication check (docs/ha.md) rides in the same bound, once the schema is there.
    const check = async () => {
      const n = await schemaVersion(pool);
      const ready = n !== null && n >= SCHEMA_VERSION;
      const risk = ready && !iso.allowAsyncReplication ? await replicationRisk(pool).catch(() => null) : null;
      return { n, risk };
    };
    const v = await Promise.race([check(), timeout]);
    if (v === null) return { ready: false, message: `The database did not answer within ${READY_TIMEOUT_MS / 1000}s.` };
    if (v.n !== null && v.n >= SCHEMA_VERSION) {
      // As the Node gateway's readiness: still ready, with what a failover would cost.
      const risk = v.risk;
      if (risk !== iso.replicationRisk) {
        if (risk) iso.log.warn(risk);
        iso.replicationRisk = risk;
      }
      return risk ? { ready: true, warnings: [risk] } : { ready: true };
    }
    return {
      ready: false,
      message:
        v.n === null
          ? `The database schema (version ${SCHEMA_VERSION}) is missing: run \`kslate migrate --database-url <direct URL>\` first (Workers never migrate).`
          : `The database schema is at version ${v.n}, this gateway needs ${SCHEMA_VERSION}: run \`kslate migrate --database-url <direct URL>\` first (Workers never migrate).`,
    };
  } catch (e) {
    return {
      ready: false,
      message: classifyDbError(e) ? 'The database is unreachable.' : `Readiness check failed: ${(e as Error).message}`,
    };
  } finally {
    clearTimeout(timer);
  }
}

/**
 * SharedContext manifests from one YAML text (KSLATE_CLASSES), for the cron sweep; invalid
 * documents and repeated class names become problem lines (and keep any class from being
 * marked gone), as a class directory's would.
 */
export function classesFromText(text: string): ClassSource {
  const manifests: ClassManifest[] = [];
  const problems: string[] = [];
  const seen = new Set<string>();
  parseAllDocuments(text, { merge: true }).forEach((doc, i) => {
    const label = `KSLATE_CLASSES#${i + 1}`;
    if (doc.errors.length > 0) {
      for (const e of doc.errors) problems.push(`${label}: YAML syntax error: ${e.message.split('\n')[0]}`);
      return;
    }
    const value = doc.toJS();
    if (value == null) return;
    const r = parseManifest(value);
    if (!r.ok) {
      for (const p of r.problems) problems.push(`${label}: ${p}`);
      return;
    }
    if (seen.has(r.manifest.metadata.name)) {
      problems.push(`${label}: duplicate class name "${r.manifest.metadata.name}"`);
      return;
    }
    seen.add(r.manifest.metadata.name);
    manifests.push(r.manifest);
  });
  return { manifests, problems };
}
