/**
 * `kslate serve`: the gateway process (HTTP/JSON on --listen, metrics and /readyz on
 * --metrics-port, gRPC on --grpc-port when it is not 0).
 */
import { readFileSync } from 'node:fs';
import type { Server } from 'node:http';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv';
import { Hono } from 'hono';
import { DatabaseModeError, migrate } from '../db/migrate.js';
import { modeFatal } from './startup-error.js';
import type { Logger } from '../handlers/context.js';
import type { Config } from './config.js';
import type { GrpcServer } from './grpc/server.js';
import { createApp, healthz, readyz } from './http/app.js';
import type { McpOptions } from './http/mcp/server.js';
import { McpSessions } from './http/mcp/sessions.js';
import { directReads } from './http/direct.js';
import { listenHttp, type ListenOptions } from './http/listen.js';
import { nodePeer } from './http/node-peer.js';
import { createServices, portInUse, type Services } from './services.js';
import { DRAIN_GRACE_MS, stopListening, trackConnections } from './drain.js';

/**
 * One JSON-schema validator for every MCP request: the SDK builds a new Ajv (with its formats)
 * for each `Server` unless given one, and a stateless server is made per POST, so that cost
 * was paid on every tool call.
 */
const NODE_MCP = { jsonSchemaValidator: new AjvJsonSchemaValidator() };

export interface Gateway {
  services: Services;
  url: string;
  metricsUrl: string;
  /** The bound gRPC port; absent when gRPC is off (--grpc-port 0). */
  grpcPort?: number;
  /** Stop at once: open connections are cut (tests, startup failures). */
  close(): Promise<void>;
  /**
   * Stop gracefully (SIGTERM/SIGINT): /readyz answers 503 at once, no new connections,
   * requests in flight finish within `drainTimeoutMs`, then gRPC, the sweep and the pool.
   * Logs one line per phase; the caller logs "stopped".
   */
  shutdown(drainTimeoutMs: number): Promise<void>;
}


/** One HTTP server of the gateway, with the timeouts and connection limit of runtime/http/listen.ts. */
function listen(
  fetch: (r: Request, env: any) => Response | Promise<Response>,
  host: string,
  port: number,
  cfg: Config,
  tls: boolean,
  s: Services,
  direct?: ListenOptions['direct'],
) {
  return listenHttp(fetch, {
    ...(direct ? { direct } : {}),
    host,
    port,
    maxConns: cfg.maxConns,
    maxConnsPerAddress: cfg.maxConnsPerAddress,
    onRefuse: (limit) => s.metrics.limitRefused(limit),
    headerTimeoutMs: cfg.headerTimeoutMs,
    requestTimeoutMs: cfg.requestTimeoutMs,
    ...(tls ? { tls: { cert: readFileSync(cfg.tlsCert!), key: readFileSync(cfg.tlsKey!) } } : {}),
  });
}

/**
 * What an embedding program (the tests) may change of a gateway beyond its configuration:
 * `mcp.direct: false` sends every MCP POST through the SDK (runtime/http/mcp/server.ts, McpOptions).
 */
export interface GatewayOptions {
  mcp?: Pick<McpOptions, 'direct'>;
  /** `direct: false` sends every API read through Hono too (runtime/http/direct.ts; the differential test compares the two). */
  http?: { direct?: boolean };
}

export async function startGateway(cfg: Config, log: Logger, opts: GatewayOptions = {}): Promise<Gateway> {
  const services = await createServices(cfg, log);
  try {
    const { applied } = await migrate(services.maintenancePool, { mode: cfg.databaseMode });
    if (applied.length > 0) log.info('database schema applied', { versions: applied });
  } catch (e) {
    if (e instanceof DatabaseModeError) {
      await services.close();
      modeFatal(e);
    }
    // Keep serving: every request answers 503 until the database is back, then /readyz applies it.
    log.warn('database not reachable at start; answering 503 until it is', { error: (e as Error).message });
  }
  // A primary without a synchronous standby is logged now (and shown in /readyz): docs/ha.md.
  await services.readiness.checkReplication();
  if (cfg.classesDir) {
    await services.reconcileOnce().catch((e) => log.warn('class reconcile at start failed; will retry', { error: (e as Error).message }));
  }
  if (cfg.sweepIntervalMs) services.sweeper.start();
  const stopSweeps = () => void services.sweeper.stop();

  const tls = Boolean(cfg.tlsCert);
  const servers: Server[] = [];
  const closeHttp = () =>
    Promise.all(
      servers.map(
        (srv) =>
          new Promise<void>((res) => {
            (srv as unknown as { closeAllConnections?: () => void }).closeAllConnections?.();
            srv.close(() => res());
          }),
      ),
    );
  /** Nothing half-started: a gateway that cannot listen where it was asked does not run. */
  const abandon = async (e: unknown) => {
    stopSweeps();
    await closeHttp();
    await services.close();
    return e;
  };

  // MCP sessions (resource subscriptions, /mcp/session): held by this process, ended at shutdown.
  const mcpSessions = new McpSessions(
    {
      maxSessions: cfg.mcpMaxSessions,
      maxSessionsPerIdentity: cfg.mcpMaxSessionsPerIdentity,
      maxSubscriptions: cfg.mcpMaxSubscriptions,
      idleMs: cfg.mcpSessionIdleMs,
    },
    log,
    (limit) => services.metrics.limitRefused(limit),
  );
  services.metrics.gauges.mcpSessions = () => mcpSessions.size;
  let api: { server: Server; port: number };
  try {
    api = await listen(createApp(services, nodePeer, { mcp: { ...NODE_MCP, ...opts.mcp, sessions: mcpSessions }, ui: cfg.ui && { ttlMs: cfg.uiSessionTtlMs } }).fetch, cfg.listenHost, cfg.listenPort, cfg, tls, services, opts.http?.direct === false ? undefined : directReads(services));
  } catch (e) {
    throw await abandon(portInUse(e, cfg.listenPort, 'API port: --listen / KSLATE_LISTEN'));
  }
  servers.push(api.server);
  const inFlight = trackConnections(api.server, tls);

  const metricsApp = new Hono();
  metricsApp.get('/metrics', async (c) =>
    c.text(await services.metrics.registry.metrics(), 200, { 'content-type': services.metrics.registry.contentType }),
  );
  metricsApp.get('/readyz', (c) => readyz(c, services));
  metricsApp.get('/healthz', (c) => healthz(c));
  let metrics: { server: Server; port: number };
  try {
    metrics = await listen(metricsApp.fetch, cfg.listenHost, cfg.metricsPort, cfg, false, services);
  } catch (e) {
    throw await abandon(portInUse(e, cfg.metricsPort, 'metrics port: --metrics-port / KSLATE_METRICS_PORT'));
  }
  servers.push(metrics.server);

  let grpcServer: GrpcServer | undefined;
  if (cfg.grpcPort !== 0) {
    // Loaded only when gRPC is on (the default is off): grpc-js and proto-loader are ~20 MB of RSS.
    const [grpc, { startGrpc }] = await Promise.all([import('@grpc/grpc-js'), import('./grpc/server.js')]);
    // grpc-js prints its own errors to stderr ("E No address added ..." before a bind fails);
    // route them through our log, where a failed bind is already one clear line.
    grpc.setLogger({
      error: (msg: unknown, ...rest: unknown[]) => {
        const text = [msg, ...rest].map(String).join(' ');
        if (/No address added/.test(text)) log.debug(`grpc: ${text}`);
        else log.warn(`grpc: ${text}`);
      },
    });
    try {
      grpcServer = await startGrpc(services, {
        host: cfg.listenHost,
        port: cfg.grpcPort,
        maxConns: cfg.maxConns,
        maxConnsPerAddress: cfg.maxConnsPerAddress,
        onRefuse: (limit) => services.metrics.limitRefused(limit),
        headerTimeoutMs: cfg.headerTimeoutMs,
        tls: tls ? { cert: readFileSync(cfg.tlsCert!), key: readFileSync(cfg.tlsKey!) } : undefined,
      });
    } catch (e) {
      throw await abandon(portInUse(e, cfg.grpcPort, 'gRPC port: --grpc-port / KSLATE_GRPC_PORT'));
    }
  }

  const host = cfg.listenHost.includes(':') ? `[${cfg.listenHost}]` : cfg.listenHost;
  const url = `${tls ? 'https' : 'http'}://${host}:${api.port}`;
  const metricsUrl = `http://${host}:${metrics.port}`;
  log.info(`kslate gateway listening on ${url} (metrics and /readyz on ${metricsUrl})`);
  if (grpcServer) log.info(`gRPC listening on ${host}:${grpcServer.port}${tls ? ' (TLS)' : ''}`);
  return {
    services,
    url,
    metricsUrl,
    ...(grpcServer ? { grpcPort: grpcServer.port } : {}),
    async close() {
      stopSweeps();
      mcpSessions.close();
      services.watch.close();
      await Promise.all([closeHttp(), grpcServer?.close(5_000)]);
      await services.close();
    },
    async shutdown(drainTimeoutMs) {
      const deadline = Date.now() + drainTimeoutMs;
      const left = () => Math.max(0, deadline - Date.now());
      services.readiness.startDraining();
      stopSweeps();
      // Watch streams never finish by themselves: each ends now (a last `end` event), so the
      // drain below waits only for ordinary requests; clients resume elsewhere. MCP sessions
      // too: their GET streams close and their subscriptions stop.
      mcpSessions.close();
      services.watch.close();
      const n = inFlight.requests();
      log.info(
        `shutting down: draining ${n} in-flight request${n === 1 ? '' : 's'} on ${inFlight.connections()} connections (at most ${drainTimeoutMs / 1000}s)`,
      );
      // gRPC refuses new calls and lets its calls in flight finish within the same budget.
      const grpcClosed = grpcServer?.close(left());
      // Nothing already sent is lost (runtime/drain.ts): the connections the kernel has
      // accepted are taken before the API port stops listening; every request on them is
      // answered, with Connection: close; a connection silent for DRAIN_GRACE_MS is closed.
      // The metrics port stays up meanwhile so probes see /readyz 503 rather than a refused connection.
      inFlight.drain(Math.min(DRAIN_GRACE_MS, left()));
      const taken = await stopListening(api.server, left() / 2);
      log.info(
        `API port closed: ${taken.accepted} connection${taken.accepted === 1 ? '' : 's'} taken from the accept queue first` +
          (taken.queued === undefined ? '' : ` (${taken.queued} waiting at the signal)`),
      );
      const drained = await inFlight.closed(left());
      if (drained) log.info('drained: every request in flight has finished');
      else {
        const r = inFlight.requests();
        log.warn(`drain timeout: cutting off ${r} request${r === 1 ? '' : 's'} still in flight after ${drainTimeoutMs / 1000}s`);
      }
      await closeHttp();
      if (grpcClosed) {
        await grpcClosed;
        log.info('gRPC stopped');
      }
      // A sweep that was already running stops between statements (its lease is released) before the pool closes.
      if (await services.close(left())) log.info('database pool closed');
      else log.warn('database pool closed with connections still busy; PostgreSQL rolls their transactions back');
    },
  };
}
