/**
 * `kslate serve`: the gateway process (HTTP/JSON on --listen, metrics and /readyz on
 * --metrics-port, gRPC on --grpc-port when it is not 0).
 */
import { readFileSync } from 'node:fs';
import { Hono } from 'hono';
import { migrate } from '../db/migrate.js';
import type { Logger } from '../handlers/context.js';
import type { Config } from './config.js';
import { startGrpc, type GrpcServer } from './grpc/server.js';
import { createApp, readyz } from './http/app.js';
import { listenHttp } from './http/listen.js';
import { createServices, type Services } from './services.js';

export interface Gateway {
  services: Services;
  url: string;
  metricsUrl: string;
  /** The bound gRPC port; absent when gRPC is off (--grpc-port 0). */
  grpcPort?: number;
  close(): Promise<void>;
}

/** One HTTP server of the gateway, with the timeouts and connection limit of runtime/http/listen.ts. */
function listen(fetch: (r: Request, env: any) => Response | Promise<Response>, host: string, port: number, cfg: Config, tls: boolean) {
  return listenHttp(fetch, {
    host,
    port,
    maxConns: cfg.maxConns,
    headerTimeoutMs: cfg.headerTimeoutMs,
    requestTimeoutMs: cfg.requestTimeoutMs,
    ...(tls ? { tls: { cert: readFileSync(cfg.tlsCert!), key: readFileSync(cfg.tlsKey!) } } : {}),
  });
}

export async function startGateway(cfg: Config, log: Logger): Promise<Gateway> {
  const services = await createServices(cfg, log);
  try {
    const { applied } = await migrate(services.pool);
    if (applied.length > 0) log.info('database schema applied', { versions: applied });
  } catch (e) {
    // Keep serving: every request answers 503 until the database is back, then /readyz applies it.
    log.warn('database not reachable at start; answering 503 until it is', { error: (e as Error).message });
  }
  if (cfg.classesDir) {
    await services.sweepOnce().catch((e) => log.warn('class reconcile at start failed; will retry', { error: (e as Error).message }));
  }
  let timer: NodeJS.Timeout | undefined;
  if (cfg.sweepIntervalMs) {
    const tick = () =>
      services
        .sweepOnce()
        .catch((e) => log.warn('sweep failed; will retry next interval', { error: (e as Error).message }))
        .finally(() => {
          timer = setTimeout(tick, cfg.sweepIntervalMs);
          timer.unref();
        });
    timer = setTimeout(tick, cfg.sweepIntervalMs);
    timer.unref();
  }

  const tls = Boolean(cfg.tlsCert);
  const api = await listen(createApp(services).fetch, cfg.listenHost, cfg.listenPort, cfg, tls);

  const metricsApp = new Hono();
  metricsApp.get('/metrics', async (c) =>
    c.text(await services.metrics.registry.metrics(), 200, { 'content-type': services.metrics.registry.contentType }),
  );
  metricsApp.get('/readyz', (c) => readyz(c, services));
  const metrics = await listen(metricsApp.fetch, cfg.listenHost, cfg.metricsPort, cfg, false);

  const closeHttp = () =>
    Promise.all(
      [api.server, metrics.server].map(
        (srv) =>
          new Promise<void>((res) => {
            (srv as unknown as { closeAllConnections?: () => void }).closeAllConnections?.();
            srv.close(() => res());
          }),
      ),
    );

  let grpcServer: GrpcServer | undefined;
  if (cfg.grpcPort !== 0) {
    try {
      grpcServer = await startGrpc(services, {
        host: cfg.listenHost,
        port: cfg.grpcPort,
        maxConns: cfg.maxConns,
        headerTimeoutMs: cfg.headerTimeoutMs,
        tls: tls ? { cert: readFileSync(cfg.tlsCert!), key: readFileSync(cfg.tlsKey!) } : undefined,
      });
    } catch (e) {
      // Nothing half-started: a gateway without the gRPC it was asked for does not run.
      if (timer) clearTimeout(timer);
      await closeHttp();
      await services.close();
      throw e;
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
      if (timer) clearTimeout(timer);
      await Promise.all([closeHttp(), grpcServer?.close()]);
      await services.close();
    },
  };
}
