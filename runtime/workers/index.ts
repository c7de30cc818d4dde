/**
 * The Workers adapter (docs/runtimes.md): the same Hono app as the Node gateway (HTTP/JSON
 * and MCP at /mcp; gRPC is Node-only) and the same sweep as `kslate sweep`, on a cron.
 *
 * Built by `npm run build:workers` into dist-workers/index.js; see wrangler.toml.example.
 */
import { CfWorkerJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/cfworker';
import { PgDb } from '../../db/kysely/index.js';
import { SvcError } from '../../handlers/errors.js';
import { sweep } from '../../worker/sweep.js';
import { createApp } from '../http/app.js';
import type { PeerAddress } from '../http/env.js';
import { openPool } from './db.js';
import type { ExecutionContext, ScheduledController, WorkersEnv } from './env.js';
import { isolateFor, requestServices, type Isolate } from './services.js';

/** The bound on sweep statements (the Node worker's MAINTENANCE_TIMEOUT_MS): a large prune is not a request. */
const SWEEP_STATEMENT_TIMEOUT_MS = 300_000;

/** Set by Cloudflare's edge to the connecting client's address; nothing else is trusted. */
const cfPeer: PeerAddress = (c) => c.req.header('cf-connecting-ip') ?? '';

/** The SDK's default validator (ajv) compiles with `new Function`, which Workers forbid. */
const mcp = { jsonSchemaValidator: new CfWorkerJsonSchemaValidator() };

export default {
  async fetch(request: Request, env: WorkersEnv, ctx: ExecutionContext): Promise<Response> {
    let iso: Isolate;
    let pool;
    let ending = false;
    try {
      iso = await isolateFor(env);
      pool = openPool(env, {
        timeoutMs: iso.dbTimeoutMs,
        // Ending the pool cancels its sockets' streams ("Stream was cancelled"): expected then.
        onPoolError: (e) =>
          ending ? iso.log.debug('database connection closed', { error: e.message }) : iso.log.warn('database connection lost', { error: e.message }),
      });
    } catch (e) {
      return cannotStart(e);
    }
    try {
      return await createApp(requestServices(iso, pool), cfPeer, { mcp }).fetch(request);
    } finally {
      // The response is complete (JSON, never streamed), so the pool's work is done.
      ending = true;
      ctx.waitUntil(pool.end().catch(() => undefined));
    }
  },

  /**
   * The cron trigger: one sweep, as `kslate sweep`, under the same lease (a second sweep
   * finds it held and does nothing). Fails the event when a step failed, as `kslate sweep`
   * exits 1.
   */
  async scheduled(_controller: ScheduledController, env: WorkersEnv, ctx: ExecutionContext): Promise<void> {
    const iso = await isolateFor(env);
    const pool = openPool(env, { max: 2, timeoutMs: Math.max(iso.dbTimeoutMs, SWEEP_STATEMENT_TIMEOUT_MS) });
    const run = (async () => {
      try {
        const report = await sweep(
          {
            db: new PgDb(pool),
            log: iso.log,
            holder: `workers/${crypto.randomUUID().slice(0, 8)}`,
            classSource: iso.classSource,
            onClassesChanged: () => {
              iso.classRows = null;
            },
          },
          { budgetMs: iso.sweepBudgetMs },
        );
        if (!report.ok) throw new Error(`sweep: ${report.errors.map((e) => `${e.step}: ${e.message}`).join('; ')}`);
      } finally {
        await pool.end().catch(() => undefined);
      }
    })();
    ctx.waitUntil(run);
    await run;
  },
};

/** A deployment that cannot start answers every request 503 with what to change. */
function cannotStart(e: unknown): Response {
  const err = new SvcError('UNAVAILABLE', `kslate on Workers cannot start: ${(e as Error)?.message ?? String(e)}`);
  console.error(JSON.stringify({ time: new Date().toISOString(), level: 'error', msg: err.message }));
  return new Response(JSON.stringify(err.body()), { status: 503, headers: { 'content-type': 'application/json' } });
}
