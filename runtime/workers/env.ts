/**
 * What a Workers deployment configures (wrangler.toml `[vars]`, secrets and bindings) and the
 * few platform types the adapter uses, declared here so the project needs no Workers type
 * package.
 */

/** The Worker's bindings: see wrangler.toml.example. */
export interface WorkersEnv {
  /** Secret: the PostgreSQL URL (direct, or a pooler's in session mode). Unused when HYPERDRIVE is bound. */
  DATABASE_URL?: string;
  /** A Hyperdrive binding: its `connectionString` reaches the database through Cloudflare's pool. */
  HYPERDRIVE?: { connectionString: string };
  /** `pg` (TCP sockets; direct or Hyperdrive; the default) or `neon` (@neondatabase/serverless Pool over WebSocket). */
  KSLATE_DB_DRIVER?: string;
  /** Comma-separated providers, as --identity: `apikey` and/or `oidc` (default `apikey`); `k8s-sa` is refused. */
  KSLATE_IDENTITY?: string;
  /** Secret: the API key file's YAML text (`keys: [{ name, sha256 }]`), as --apikeys FILE holds it. */
  KSLATE_APIKEYS?: string;
  KSLATE_OIDC_ISSUER?: string;
  KSLATE_OIDC_AUDIENCE?: string;
  KSLATE_OIDC_JWKS_URL?: string;
  KSLATE_OIDC_USERNAME_CLAIM?: string;
  /** Optional SharedContext manifests (YAML, `---`-separated) the cron sweep reconciles; absent = classes left alone. */
  KSLATE_CLASSES?: string;
  /** Statement, lock and idle-transaction budget, as --db-timeout (default 10s). */
  KSLATE_DB_TIMEOUT?: string;
  /** Time budget of one cron sweep, as --sweep-budget (default: the sweep's 30s). */
  KSLATE_SWEEP_BUDGET?: string;
  /** debug | info | warn | error (default info). */
  KSLATE_LOG_LEVEL?: string;
  /** `true`: accept a primary without a synchronous standby, as --allow-async-replication (docs/ha.md). */
  KSLATE_ALLOW_ASYNC_REPLICATION?: string;
  /**
   * Test and development only: a WebSocket-to-TCP proxy `host:port` for the neon driver (for
   * a plain PostgreSQL without Neon's proxy in front); unencrypted WebSocket, no pipelining.
   */
  KSLATE_NEON_WS_PROXY?: string;
}

/** The part of the Workers ExecutionContext the adapter uses. */
export interface ExecutionContext {
  waitUntil(promise: Promise<unknown>): void;
}

/** The part of the Workers ScheduledController the adapter uses. */
export interface ScheduledController {
  readonly scheduledTime: number;
  readonly cron: string;
}
