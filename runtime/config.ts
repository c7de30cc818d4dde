/**
 * Configuration, parsed once at the entry: every flag has a KSLATE_* variable (decisions §6);
 * a bad value fails with the flag and variable named.
 */
import { parseArgs } from 'node:util';
import { parseDuration } from '../handlers/class-schema.js';

export interface Config {
  databaseUrl: string | undefined;
  /** `--database-mode`: plain PostgreSQL or Citus (docs/scale-out.md); auto follows the citus extension. */
  databaseMode: 'auto' | 'plain' | 'citus';
  /** Standbys that serve reads (--database-replica-url, repeatable; docs/ha.md "Reads from standbys"). */
  databaseReplicaUrls: string[];
  /** An untokened read uses a standby only while its replay lag is under this. */
  replicaMaxLagMs: number;
  /** A read with X-Kslate-Min-Lsn waits at most this long for a standby to replay it, then reads the primary. */
  replicaWaitMs: number;
  /** Whether writes read their WAL position for X-Kslate-Lsn (one more round trip): auto = when standbys are given. */
  writeLsn: 'auto' | 'on' | 'off';
  /** Coalesce writes that arrive while others are in flight into one statement and commit (docs/performance.md "Coalesced writes"). */
  writeBatching: boolean;
  /** --write-queue-max: writes that may wait in the write batcher's queue (db/kysely/batch.ts). */
  writeQueueMax: number;
  listenHost: string;
  listenPort: number;
  grpcPort: number;
  metricsPort: number;
  maxConns: number;
  /** Connections one client address may hold at once (0: no per-address cap). */
  maxConnsPerAddress: number;
  /** Close a connection that has not sent a complete request head (HTTP) or anything (gRPC) by then. */
  headerTimeoutMs: number;
  /** Close a connection that has not sent a whole request (head and body) by then. */
  requestTimeoutMs: number;
  tlsCert: string | undefined;
  tlsKey: string | undefined;
  classesDir: string | undefined;
  sweepIntervalMs: number | undefined;
  /** Time budget of the sweep's batched steps (expiry, purge, lapsed leases); undefined = derived from the interval. */
  sweepBudgetMs: number | undefined;
  /** worker: /readyz and /healthz port. */
  healthPort: number;
  /** Namespace watched for SharedContext objects; '' = every namespace. */
  watchNamespace: string;
  identity: string[];
  apikeysFile: string | undefined;
  oidcIssuer: string | undefined;
  oidcAudience: string | undefined;
  oidcJwksUrl: string | undefined;
  oidcUsernameClaim: string;
  /** The audience a k8s-sa token must be issued for (TokenReview spec.audiences). */
  k8sAudience: string;
  trustProxy: number;
  logLevel: string;
  dataDir: string;
  /** How long a stopping gateway lets requests in flight finish (SIGTERM/SIGINT). */
  drainTimeoutMs: number;
  /** Budget for one request's database work; the server-side timeouts and the client-side bound. */
  dbTimeoutMs: number;
  /** The request pool's connections (the sweep and maintenance use two more). */
  dbPoolSize: number;
  /** The operator accepts a primary without a synchronous standby: no warning at start or in /readyz (docs/ha.md). */
  allowAsyncReplication: boolean;
  /** dev only: the embedded PostgreSQL's port. */
  devPgPort: number;
  /** Serve the read-only web console at /ui on the API port (docs/console.md). */
  ui: boolean;
  /** How long a console sign-in session lives (docs/console.md "Sessions"). */
  uiSessionTtlMs: number;
  /** `--idempotency-ttl`: how long a write's answer is kept under its key (issue 33). */
  idempotencyTtlMs: number;
  /** Watch streams (docs/watch.md): the change log's poll interval, heartbeats, limits and retained window. */
  watchPollMs: number;
  watchHeartbeatMs: number;
  watchMaxStreams: number;
  watchQueue: number;
  watchRetentionMs: number;
  /** Watch streams per identity (at most watchMaxStreams). */
  watchMaxStreamsPerIdentity: number;
  /** Bytes of one stream's catch-up read; bytes all streams together hold for their clients. */
  watchStreamBufferBytes: number;
  watchBufferBytes: number;
  /** A stream whose client has not taken its last event for this long ends `slow`. */
  watchSlowTimeoutMs: number;
  /** A stream ends `max_age` after this long (clients resume with their last id). */
  watchMaxAgeMs: number;
  /** MCP sessions for resource subscriptions (docs/mcp.md, "Subscriptions"): per-process, per-identity and per-session caps, idle expiry. */
  mcpMaxSessions: number;
  mcpMaxSessionsPerIdentity: number;
  mcpMaxSubscriptions: number;
  mcpSessionIdleMs: number;
}

/** The log levels --log-level accepts. */
export const LOG_LEVELS = ['debug', 'info', 'warn', 'error'] as const;

interface FlagSpec {
  env: string;
  help: string;
  default?: string;
}

/** Every flag's help and default; its variable follows from its name (envName). */
const FLAG_SPECS: Record<string, Omit<FlagSpec, 'env'>> = {
  'database-url': { help: 'PostgreSQL connection string (required for serve, sweep)' },
  'database-mode': {
    help: 'auto, plain or citus: citus distributes the schema by record over a Citus cluster (--database-url names its coordinator; docs/scale-out.md), plain keeps it on one PostgreSQL; auto is citus when the database has the citus extension. citus without the extension, or plain with it, refuses to start',
    default: 'auto',
  },
  'database-replica-url': {
    help: 'a streaming standby that serves reads (repeat the flag for several; the variable takes a comma-separated list); docs/ha.md',
  },
  'replica-max-lag': {
    help: 'a read without X-Kslate-Min-Lsn uses a standby only while its replay lag is under this',
    default: '1s',
  },
  'replica-wait': { help: 'a read with X-Kslate-Min-Lsn waits at most this long for a standby to replay it, then reads from the primary', default: '50ms' },
  'write-lsn': {
    help: 'answer every write with X-Kslate-Lsn, its read-your-writes token (one more database round trip per write): auto (when --database-replica-url is given), on, off',
    default: 'auto',
  },
  'write-batching': {
    help: 'on: puts, appends, claims and transactions that arrive while write statements are in flight go together as one statement and one commit, each with its own outcome (docs/performance.md "Coalesced writes"); off: one statement each. Always off on Citus',
    default: 'on',
  },
  'write-queue-max': {
    help: 'with --write-batching on, at most this many writes wait in the gateway for a batch; past it a write answers 503 UNAVAILABLE with Retry-After, not sent (svc_limit_refusals_total{limit="write_queue"})',
    default: '4096',
  },
  listen: { help: 'HTTP/JSON and MCP address host:port', default: '127.0.0.1:8080' },
  'grpc-port': { help: 'gRPC port; 0 disables gRPC', default: '0' },
  'metrics-port': { help: 'metrics, /readyz and /healthz port', default: '9100' },
  'max-conns': { help: 'concurrent connections', default: '4096' },
  'max-conns-per-address': {
    help: 'concurrent connections from one client address (at most --max-conns; 0 = no cap); default 256, or no cap with --trust-proxy (the peer is then the proxy)',
  },
  'header-timeout': {
    help: 'close a connection that sent no complete request head (or gRPC preface) within this; also the keep-alive idle limit (at most 5s)',
    default: '10s',
  },
  'request-timeout': { help: 'close a connection whose request (head and body) takes longer', default: '60s' },
  'tls-cert': { help: 'PEM certificate file; serves TLS with --tls-key' },
  'tls-key': { help: 'PEM private key file' },
  classes: { help: 'directory of SharedContext manifests to reconcile' },
  'sweep-interval': {
    help: 'serve: also run the sweep in-process this often (e.g. 60s), none when unset; worker: its interval (60s), dev: 10s',
  },
  'sweep-budget': {
    help: "time one sweep spends expiring records and flagging leases before leaving the rest to the next (default: 30s or half the interval)",
  },
  'health-port': { help: 'worker: /readyz and /healthz port', default: '8081' },
  'watch-namespace': {
    help: 'namespace whose SharedContext objects are classes when no --classes is given; empty = every namespace',
    default: '',
  },
  identity: { help: 'identity providers in order, comma-separated', default: 'k8s-sa' },
  apikeys: { help: 'API key file (apikeys.yaml) for the apikey provider' },
  'oidc-issuer': { help: 'oidc provider: the issuer URL (its discovery document gives the JWKS)' },
  'oidc-audience': { help: 'oidc provider: the audience tokens must carry (required with oidc)' },
  'oidc-jwks-url': { help: 'oidc provider: the JWKS URL, instead of discovery' },
  'oidc-username-claim': { help: 'oidc provider: the claim naming the caller', default: 'sub' },
  'k8s-audience': { help: 'audience a k8s-sa token must be issued for', default: 'kslate' },
  'trust-proxy': { help: 'number of proxy hops to trust for the client address (X-Forwarded-For) and scheme (X-Forwarded-Proto)', default: '0' },
  'log-level': { help: 'debug, info, warn or error', default: 'info' },
  'drain-timeout': { help: 'on SIGTERM/SIGINT, let requests in flight finish for at most this long', default: '25s' },
  'db-timeout': { help: "a request's database work longer than this answers 503 UNAVAILABLE", default: '10s' },
  'db-pool-size': { help: 'database connections for requests; more requests than this wait in the gateway, not in PostgreSQL', default: '10' },
  'allow-async-replication': {
    help: 'true: accept a primary without a synchronous standby (no warning at start or in /readyz); a failover may then lose acknowledged writes (docs/ha.md)',
    default: 'false',
  },
  ui: { help: 'serve the read-only web console at /ui on the API port (true or false)', default: 'true' },
  'ui-session-ttl': { help: 'how long a console sign-in lasts before the person must sign in again (at most 720h)', default: '8h' },
  'idempotency-ttl': {
    help: 'how long a write\'s answer is kept under its Idempotency-Key for retries to replay (1s to 720h; the worker\'s sweep deletes expired keys)',
    default: '24h',
  },
  'watch-poll-interval': { help: 'how often the gateway reads the change log while watch streams are open', default: '100ms' },
  'watch-heartbeat': { help: 'a watch stream with nothing to send sends a heartbeat this often', default: '15s' },
  'watch-max-streams': { help: 'open watch streams per gateway; beyond it a watch answers 503 UNAVAILABLE', default: '1024' },
  'watch-queue': { help: 'changes one watch stream may have waiting before it is closed as too slow', default: '1000' },
  'watch-retention': { help: 'how far back a class watch cursor may resume; older answers 410 EXPIRED', default: '1h' },
  'watch-max-streams-per-identity': {
    help: 'open watch streams (and MCP subscriptions) of one identity per gateway, at most --watch-max-streams; beyond it a watch answers 429 RATE_LIMITED',
    default: '256',
  },
  'watch-stream-buffer': {
    help: 'bytes a watch stream reads at a time to catch up, sent before it reads more (a larger change is read alone); e.g. 1Mi',
    default: '1Mi',
  },
  'watch-buffer': {
    help: 'bytes all watch streams together may hold for their clients (catch-up reads, the event being written); beyond it streams wait their turn',
    default: '64Mi',
  },
  'watch-slow-timeout': {
    help: 'a watch stream whose client has not taken its last event (the socket does not drain) for this long ends (slow)',
    default: '30s',
  },
  'watch-max-age': {
    help: 'a watch stream ends (max_age) after this long (spread over its last tenth); clients resume with their last event id',
    default: '1h',
  },
  'mcp-max-sessions': {
    help: 'MCP sessions (/mcp/session, for resource subscriptions) per gateway; beyond it an initialize answers 503 UNAVAILABLE',
    default: '256',
  },
  'mcp-max-sessions-per-identity': {
    help: 'MCP sessions of one identity per gateway, at most --mcp-max-sessions; beyond it an initialize answers 429 RATE_LIMITED',
    default: '64',
  },
  'mcp-max-subscriptions': { help: 'resource subscriptions per MCP session', default: '64' },
  'mcp-session-idle': {
    help: 'an MCP session without its GET stream and without requests, or leaving a notification untaken, ends after this',
    default: '60s',
  },
  'data-dir': { help: 'dev only: where the embedded PostgreSQL keeps its data', default: '.kslate' },
  'dev-pg-port': { help: "dev only: the embedded PostgreSQL's port", default: '54329' },
};

/** A flag's variable is KSLATE_ and its name in upper snake case (--db-pool-size: KSLATE_DB_POOL_SIZE). */
const envName = (flag: string) => `KSLATE_${flag.toUpperCase().replaceAll('-', '_')}`;

/** Every flag, its variable and its default: the README's configuration table comes from here. */
export const FLAGS: Record<string, FlagSpec> = Object.fromEntries(
  Object.entries(FLAG_SPECS).map(([flag, spec]) => [flag, { env: envName(flag), ...spec }]),
);

/**
 * Defaults a command has of its own, over FLAGS' (decisions §6: the worker sweeps every 60s with
 * metrics on 9090; `kslate dev` runs the examples with API keys). Its `--help` shows these.
 */
export const COMMAND_DEFAULTS: Record<string, Record<string, string>> = {
  worker: { 'sweep-interval': '60s', 'metrics-port': '9090' },
  // One embedded PostgreSQL for development: no standby to fail over to (docs/ha.md).
  dev: { identity: 'apikey', apikeys: 'examples/apikeys.yaml', classes: 'examples/classes', 'sweep-interval': '10s', 'allow-async-replication': 'true' },
};

export class ConfigError extends Error {}

/** Flags given once per value (their variable takes a comma-separated list). */
const REPEATABLE = new Set(['database-replica-url']);

export function parseConfig(argv: string[], env: NodeJS.ProcessEnv = process.env, defaults: Record<string, string> = {}): Config {
  const options = Object.fromEntries(
    Object.keys(FLAGS).map((k) => [k, { type: 'string' as const, ...(REPEATABLE.has(k) ? { multiple: true } : {}) }]),
  );
  let values: Record<string, string | undefined>;
  let repeated: Record<string, string[] | undefined>;
  try {
    const parsed = parseArgs({ args: argv, options, allowPositionals: false, strict: true }).values as Record<string, string | string[] | undefined>;
    repeated = Object.fromEntries([...REPEATABLE].map((k) => [k, parsed[k] as string[] | undefined]));
    for (const k of REPEATABLE) delete parsed[k];
    values = parsed as Record<string, string | undefined>;
  } catch (e) {
    throw new ConfigError(`${(e as Error).message}. Run \`kslate help\` for the flags.`);
  }
  const raw = (flag: string): string | undefined =>
    values[flag] ?? env[FLAGS[flag].env] ?? defaults[flag] ?? FLAGS[flag].default;
  const int = (flag: string, min: number, max: number): number => {
    const s = raw(flag) ?? '';
    const n = Number(s);
    if (!/^\d+$/.test(s) || n < min || n > max) {
      throw new ConfigError(`--${flag} (${FLAGS[flag].env}) must be an integer from ${min} to ${max}; got "${s}".`);
    }
    return n;
  };

  const listen = raw('listen')!;
  const m = /^(.*):(\d+)$/.exec(listen);
  if (!m) throw new ConfigError(`--listen (KSLATE_LISTEN) must be host:port, e.g. 127.0.0.1:8080; got "${listen}".`);
  const listenPort = Number(m[2]);
  if (listenPort > 65535) throw new ConfigError(`--listen (KSLATE_LISTEN) port must be at most 65535; got ${listenPort}.`);

  let sweepIntervalMs: number | undefined;
  const si = raw('sweep-interval');
  if (si !== undefined && si !== '') {
    const ms = parseDuration(si);
    if (ms === null || ms <= 0) {
      throw new ConfigError(`--sweep-interval (KSLATE_SWEEP_INTERVAL) must be a duration like 60s or 5m; got "${si}".`);
    }
    sweepIntervalMs = ms;
  }
  let sweepBudgetMs: number | undefined;
  const sb = raw('sweep-budget');
  if (sb !== undefined && sb !== '') {
    const ms = parseDuration(sb);
    if (ms === null || ms <= 0) throw new ConfigError(`--sweep-budget (KSLATE_SWEEP_BUDGET) must be a duration like 30s; got "${sb}".`);
    sweepBudgetMs = ms;
  }
  const watchNamespace = (raw('watch-namespace') ?? '').trim();
  if (watchNamespace !== '' && !/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(watchNamespace)) {
    throw new ConfigError(`--watch-namespace (KSLATE_WATCH_NAMESPACE) must be a Kubernetes namespace name (or empty for all); got "${watchNamespace}".`);
  }
  const duration = (flag: string, example = '10s or 1m'): number => {
    const s = raw(flag) ?? '';
    const ms = parseDuration(s);
    if (ms === null || ms <= 0) {
      throw new ConfigError(`--${flag} (${FLAGS[flag].env}) must be a duration like ${example}; got "${s}".`);
    }
    return ms;
  };
  const headerTimeoutMs = duration('header-timeout');
  const requestTimeoutMs = duration('request-timeout');
  if (requestTimeoutMs < headerTimeoutMs) {
    throw new ConfigError(
      `--request-timeout (KSLATE_REQUEST_TIMEOUT) must be at least --header-timeout (KSLATE_HEADER_TIMEOUT); got ${raw('request-timeout')} < ${raw('header-timeout')}.`,
    );
  }
  const logLevel = raw('log-level') ?? 'info';
  if (!(LOG_LEVELS as readonly string[]).includes(logLevel)) {
    throw new ConfigError(`--log-level (KSLATE_LOG_LEVEL) must be one of ${LOG_LEVELS.join(', ')}; got "${logLevel}".`);
  }
  const identity = (raw('identity') ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  for (const p of identity) {
    if (!['apikey', 'k8s-sa', 'oidc'].includes(p)) {
      throw new ConfigError(`--identity (KSLATE_IDENTITY) names unknown provider "${p}"; use apikey, k8s-sa or oidc.`);
    }
  }
  const k8sAudience = (raw('k8s-audience') ?? '').trim();
  if (k8sAudience === '') throw new ConfigError('--k8s-audience (KSLATE_K8S_AUDIENCE) must not be empty; the default is kslate.');
  const cert = raw('tls-cert');
  const key = raw('tls-key');
  if (Boolean(cert) !== Boolean(key)) {
    throw new ConfigError('--tls-cert (KSLATE_TLS_CERT) and --tls-key (KSLATE_TLS_KEY) go together; give both or neither.');
  }
  const allowAsync = raw('allow-async-replication') ?? 'false';
  if (allowAsync !== 'true' && allowAsync !== 'false') {
    throw new ConfigError(`--allow-async-replication (KSLATE_ALLOW_ASYNC_REPLICATION) must be true or false; got "${allowAsync}".`);
  }
  const bytes = (flag: string): number => {
    const s = raw(flag) ?? '';
    const n = parseBytes(s);
    if (n === null || n < 1024) {
      throw new ConfigError(`--${flag} (${FLAGS[flag].env}) must be a size of at least 1Ki, in bytes or with Ki, Mi or Gi (e.g. 1Mi); got "${s}".`);
    }
    return n;
  };
  /** A per-caller cap: at most the process-wide one it divides (given above it, it is refused; by default it is lowered). */
  const perCaller = (flag: string, globalFlag: string, global: number, min = 1): number => {
    const given = values[flag] ?? env[FLAGS[flag].env] ?? defaults[flag];
    const n = int(flag, min, 1_000_000);
    if (given === undefined || given === '') return Math.min(n, global);
    if (n > global) {
      throw new ConfigError(
        `--${flag} (${FLAGS[flag].env}) must be at most --${globalFlag} (${FLAGS[globalFlag].env}, ${global}); got ${n}.`,
      );
    }
    return n;
  };
  const maxConns = int('max-conns', 1, 1_000_000);
  const trustProxy = int('trust-proxy', 0, 32);
  const perAddressGiven = values['max-conns-per-address'] ?? env[FLAGS['max-conns-per-address'].env] ?? defaults['max-conns-per-address'];
  // Behind a proxy every connection comes from the proxy: no per-address cap unless asked for.
  const maxConnsPerAddress =
    perAddressGiven === undefined || perAddressGiven === '' ? (trustProxy > 0 ? 0 : Math.min(256, maxConns)) : perCaller('max-conns-per-address', 'max-conns', maxConns, 0);
  const watchMaxStreams = int('watch-max-streams', 1, 1_000_000);
  const mcpMaxSessions = int('mcp-max-sessions', 1, 1_000_000);
  const ui = raw('ui') ?? 'true';
  if (ui !== 'true' && ui !== 'false') throw new ConfigError(`--ui (KSLATE_UI) must be true or false; got "${ui}".`);
  const uiSessionTtlMs = duration('ui-session-ttl', '8h or 30m');
  if (uiSessionTtlMs < 1000 || uiSessionTtlMs > 720 * 3600_000) {
    throw new ConfigError(`--ui-session-ttl (KSLATE_UI_SESSION_TTL) must be from 1s to 720h (30 days); got "${raw('ui-session-ttl')}".`);
  }
  const idempotencyTtlMs = duration('idempotency-ttl', '24h or 30m');
  if (idempotencyTtlMs < 1000 || idempotencyTtlMs > 720 * 3600_000) {
    throw new ConfigError(`--idempotency-ttl (KSLATE_IDEMPOTENCY_TTL) must be from 1s to 720h (30 days); got "${raw('idempotency-ttl')}".`);
  }
  const replicaFlag = repeated['database-replica-url'];
  const databaseReplicaUrls = (replicaFlag ?? (env[FLAGS['database-replica-url'].env] ?? defaults['database-replica-url'] ?? '').split(','))
    .map((u) => u.trim())
    .filter(Boolean);
  for (const u of databaseReplicaUrls) {
    if (!/^postgres(ql)?:\/\//.test(u)) {
      throw new ConfigError(
        `--database-replica-url (KSLATE_DATABASE_REPLICA_URL) must be a postgres:// connection string of a streaming standby; got one starting "${u.slice(0, 12)}".`,
      );
    }
  }
  const databaseMode = raw('database-mode') ?? 'auto';
  if (databaseMode !== 'auto' && databaseMode !== 'plain' && databaseMode !== 'citus') {
    throw new ConfigError(`--database-mode (KSLATE_DATABASE_MODE) must be auto, plain or citus; got "${databaseMode}".`);
  }
  const writeLsn = raw('write-lsn') ?? 'auto';
  if (writeLsn !== 'auto' && writeLsn !== 'on' && writeLsn !== 'off') {
    throw new ConfigError(`--write-lsn (KSLATE_WRITE_LSN) must be auto, on or off; got "${writeLsn}".`);
  }
  const writeBatching = raw('write-batching') ?? 'on';
  if (writeBatching !== 'on' && writeBatching !== 'off') {
    throw new ConfigError(`--write-batching (KSLATE_WRITE_BATCHING) must be on or off; got "${writeBatching}".`);
  }
  return {
    idempotencyTtlMs,
    writeBatching: writeBatching === 'on',
    writeQueueMax: int('write-queue-max', 1, 1_000_000),
    databaseUrl: raw('database-url') || undefined,
    databaseMode,
    databaseReplicaUrls,
    replicaMaxLagMs: duration('replica-max-lag', '1s or 500ms'),
    replicaWaitMs: duration('replica-wait', '50ms'),
    writeLsn,
    listenHost: m[1].replace(/^\[(.*)\]$/, '$1'),
    listenPort,
    grpcPort: int('grpc-port', 0, 65535),
    metricsPort: int('metrics-port', 0, 65535),
    maxConns,
    maxConnsPerAddress,
    headerTimeoutMs,
    requestTimeoutMs,
    tlsCert: cert || undefined,
    tlsKey: key || undefined,
    classesDir: raw('classes') || undefined,
    sweepIntervalMs,
    sweepBudgetMs,
    healthPort: int('health-port', 0, 65535),
    watchNamespace,
    identity,
    apikeysFile: raw('apikeys') || undefined,
    oidcIssuer: raw('oidc-issuer') || undefined,
    oidcAudience: raw('oidc-audience') || undefined,
    oidcJwksUrl: raw('oidc-jwks-url') || undefined,
    oidcUsernameClaim: raw('oidc-username-claim') || 'sub',
    k8sAudience,
    trustProxy,
    logLevel,
    dataDir: raw('data-dir') ?? '.kslate',
    drainTimeoutMs: duration('drain-timeout', '25s'),
    dbTimeoutMs: duration('db-timeout', '10s'),
    dbPoolSize: int('db-pool-size', 1, 1000),
    allowAsyncReplication: allowAsync === 'true',
    devPgPort: int('dev-pg-port', 1, 65535),
    ui: ui === 'true',
    uiSessionTtlMs,
    watchPollMs: duration('watch-poll-interval', '100ms'),
    watchHeartbeatMs: duration('watch-heartbeat', '15s'),
    watchMaxStreams,
    watchQueue: int('watch-queue', 1, 1_000_000),
    watchRetentionMs: duration('watch-retention', '1h'),
    watchMaxStreamsPerIdentity: perCaller('watch-max-streams-per-identity', 'watch-max-streams', watchMaxStreams),
    watchStreamBufferBytes: bytes('watch-stream-buffer'),
    watchBufferBytes: bytes('watch-buffer'),
    watchSlowTimeoutMs: duration('watch-slow-timeout', '30s'),
    watchMaxAgeMs: duration('watch-max-age', '1h'),
    mcpMaxSessions,
    mcpMaxSessionsPerIdentity: perCaller('mcp-max-sessions-per-identity', 'mcp-max-sessions', mcpMaxSessions),
    mcpMaxSubscriptions: int('mcp-max-subscriptions', 1, 1_000_000),
    mcpSessionIdleMs: duration('mcp-session-idle', '60s'),
  };
}

/** A size in bytes: an integer, optionally with a binary suffix (Ki, Mi, Gi) as Kubernetes quantities write it; null when malformed. */
export function parseBytes(s: string): number | null {
  const m = /^(\d{1,12})(Ki|Mi|Gi)?$/.exec(s.trim());
  if (!m) return null;
  const n = Number(m[1]) * (m[2] === 'Gi' ? 2 ** 30 : m[2] === 'Mi' ? 2 ** 20 : m[2] === 'Ki' ? 2 ** 10 : 1);
  return Number.isSafeInteger(n) ? n : null;
}
