/**
 * A WebSocket-to-TCP proxy as Neon's serverless driver expects one (`neonConfig.wsProxy`):
 * a client connects to `ws://127.0.0.1:<port>/v2?address=<host>:<port>` and its binary
 * messages are the PostgreSQL wire protocol to and from that address. Lets the `neon` driver
 * reach the test PostgreSQL from workerd. Test only: no TLS, loopback targets only.
 */
import { connect } from 'node:net';
import { WebSocketServer, type WebSocket } from 'ws';

export interface WsProxy {
  port: number;
  /** Connections opened so far (a test checks the driver really went through here). */
  readonly connections: number;
  close(): Promise<void>;
}

export async function startWsProxy(): Promise<WsProxy> {
  const wss = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  await new Promise<void>((resolve, reject) => {
    wss.once('listening', resolve);
    wss.once('error', reject);
  });
  let connections = 0;
  const sockets = new Set<WebSocket>();
  wss.on('connection', (ws, req) => {
    const address = new URL(req.url ?? '/', 'http://proxy').searchParams.get('address') ?? '';
    const m = /^(127\.0\.0\.1|localhost|\[::1\]):(\d+)$/.exec(address);
    if (!m) {
      ws.close(1008, `address must be a loopback host:port, got ${address}`);
      return;
    }
    connections++;
    sockets.add(ws);
    const tcp = connect({ host: m[1] === 'localhost' ? '127.0.0.1' : m[1]!.replace(/[[\]]/g, ''), port: Number(m[2]) });
    const pending: Buffer[] = [];
    let open = false;
    tcp.on('connect', () => {
      open = true;
      for (const b of pending.splice(0)) tcp.write(b);
    });
    ws.on('message', (data) => {
      const b = Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data as ArrayBuffer);
      if (open) tcp.write(b);
      else pending.push(b);
    });
    tcp.on('data', (b) => ws.send(b));
    const end = () => {
      tcp.destroy();
      if (ws.readyState === ws.OPEN || ws.readyState === ws.CONNECTING) ws.close();
      sockets.delete(ws);
    };
    tcp.on('close', end);
    tcp.on('error', end);
    ws.on('close', end);
    ws.on('error', end);
  });
  return {
    port: (wss.address() as { port: number }).port,
    get connections() {
      return connections;
    },
    async close() {
      for (const ws of sockets) ws.terminate();
      await new Promise<void>((resolve) => wss.close(() => resolve()));
    },
  };
}
