/**
 * The HTTP servers of the gateway (API and metrics ports): @hono/node-server's request
 * listener on a node:http (or node:https) server hardened so that no client can hold the
 * port (issue 10):
 *
 * - `headersTimeout` = --header-timeout: a connection that has not sent a complete request
 *   head by then is closed, including one that never sends a byte (Node's connection list
 *   counts a fresh connection as a request in progress; checked every
 *   `connectionsCheckingInterval`, set well below the timeout instead of Node's 30 s).
 * - `requestTimeout` = --request-timeout: the whole request (head and body) must arrive by then.
 * - `keepAliveTimeout`: an idle keep-alive connection is closed after min(5 s, header timeout)
 *   (plus Node's 1 s margin), unless its next request has reached the socket by then.
 * - TLS: `handshakeTimeout` = the header timeout (Node's default is 120 s).
 * - --max-conns: on plain HTTP a connection over the limit is answered 503 UNAVAILABLE with
 *   `Connection: close` and closed, instead of the reset `server.maxConnections` gives. With
 *   TLS the answer would need a handshake first, so such a connection is reset.
 * - --max-conns-per-address (issue 31): one client address holds at most that many of them,
 *   so a client that reconnects every closed socket cannot take the whole limit; one more
 *   from that address is answered 429 RATE_LIMITED the same way (TLS: reset).
 * - Parse errors (`clientError`) are answered with a JSON body and the socket ended after the
 *   answer is written: 431 for a head over 16 KiB, 408 for a request that timed out, 400
 *   otherwise. Node's default handler destroys the socket at once, so a client still
 *   sending often sees a reset instead of the answer.
 */
import { createServer as createHttpServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import { getRequestListener } from '@hono/node-server';
import { SvcError } from '../../handlers/errors.js';
import { afterNextPoll } from '../drain.js';

export interface ListenOptions {
  host: string;
  port: number;
  maxConns: number;
  /** Connections one peer address may hold (0: no cap). */
  maxConnsPerAddress?: number;
  /** A connection refused by either cap (metrics). */
  onRefuse?: (limit: 'conns' | 'conns_per_address') => void;
  headerTimeoutMs: number;
  requestTimeoutMs: number;
  tls?: { cert: Buffer; key: Buffer };
  /**
   * Requests this takes (it answers them and returns true) skip the Web adapter and `fetch`
   * (the API port's direct path, runtime/http/direct.ts); the rest go to `fetch`.
   */
  direct?: (req: IncomingMessage, res: ServerResponse) => boolean;
}

/** Node's default keep-alive idle time, kept unless the header timeout is shorter. */
const KEEP_ALIVE_MS = 5000;
/**
 * Connections over --max-conns that are being answered 503 at the same time; beyond these a
 * connection is reset, so refusing costs bounded memory and file descriptors too.
 */
export const REFUSING_SLOTS = 128;
/** How long a refused or failed connection may keep sending (discarded) before it is destroyed. */
const LINGER_MS = 2000;

export async function listenHttp(
  fetch: (req: Request, env: any) => Response | Promise<Response>,
  opts: ListenOptions,
): Promise<{ server: Server; port: number }> {
  const serverOptions = {
    headersTimeout: opts.headerTimeoutMs,
    requestTimeout: opts.requestTimeoutMs,
    keepAliveTimeout: Math.min(KEEP_ALIVE_MS, opts.headerTimeoutMs),
    // Node checks the two timeouts above on this interval (default 30 s).
    connectionsCheckingInterval: Math.max(50, Math.min(1000, Math.floor(opts.headerTimeoutMs / 4))),
  };
  const viaFetch = getRequestListener(fetch, { hostname: opts.host }) as (req: IncomingMessage, res: ServerResponse) => void;
  const direct = opts.direct;
  const listener = direct
    ? (req: IncomingMessage, res: ServerResponse) => {
        if (!direct(req, res)) viaFetch(req, res);
      }
    : viaFetch;
  const server: Server = opts.tls
    ? createHttpsServer({ ...serverOptions, cert: opts.tls.cert, key: opts.tls.key, handshakeTimeout: opts.headerTimeoutMs }, listener)
    : createHttpServer(serverOptions, listener);
  limitConnections(server, opts.maxConns, !opts.tls, new PerAddress(opts.maxConnsPerAddress ?? 0), opts.onRefuse);
  server.on('clientError', answerClientError);
  // Node's keep-alive timer: with a listener here Node leaves the socket to us (socketOnTimeout).
  server.on('timeout', closeIfStillIdle);

  const port = await new Promise<number>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host, () => {
      server.off('error', reject);
      resolve((server.address() as AddressInfo).port);
    });
  });
  return { server, port };
}

/**
 * Count connections ourselves and handle those over the limit before Node's HTTP
 * connection listener sees them: it is taken off the 'connection' event and called only
 * for connections under the limit.
 */
function limitConnections(
  server: Server,
  maxConns: number,
  answer503: boolean,
  perAddress: PerAddress,
  onRefuse: ListenOptions['onRefuse'] = () => undefined,
): void {
  // Node installs exactly one: http's connection listener, or for https the TLS one.
  const listeners = server.listeners('connection') as ((socket: Socket) => void)[];
  server.removeAllListeners('connection');
  const http = (socket: Socket) => {
    for (const l of listeners) l.call(server, socket);
  };
  let open = 0;
  let refusing = 0;
  server.on('connection', (socket: Socket) => {
    const full = open >= maxConns;
    if (!full && perAddress.take(socket)) {
      open++;
      socket.once('close', () => open--);
      http(socket);
      return;
    }
    onRefuse(full ? 'conns' : 'conns_per_address');
    if (!answer503 || refusing >= REFUSING_SLOTS) {
      socket.destroy();
      return;
    }
    refusing++;
    socket.once('close', () => refusing--);
    if (full) {
      const body = new SvcError(
        'UNAVAILABLE',
        `The gateway is at its connection limit (${maxConns}, --max-conns); retry shortly, or reuse one connection for several requests.`,
      ).body();
      endGracefully(socket, rawResponse(503, 'Service Unavailable', body, { 'Retry-After': '1' }));
    } else {
      const body = new SvcError(
        'RATE_LIMITED',
        `Your address holds the maximum of ${perAddress.max} connections to this gateway (--max-conns-per-address); reuse an open connection for more requests (keep-alive), or close one first.`,
      ).body();
      endGracefully(socket, rawResponse(429, 'Too Many Requests', body, { 'Retry-After': '1' }));
    }
  });
}

/**
 * An idle keep-alive connection whose timer has fired is closed, unless its next request has
 * already arrived. Node's default destroys it at once, and a timer that fires late (a busy
 * event loop, e.g. one serializing a 10,000-row history page) then resets a request the
 * client sent well within the advertised `Keep-Alive: timeout`, still unread in the kernel.
 * So the socket gets one poll to read what is there: bytes read mean a request is under way
 * (answered as usual); none mean it is idle, and it is closed as before.
 */
function closeIfStillIdle(socket: Socket): void {
  const before = socket.bytesRead;
  void afterNextPoll().then(() => {
    if (socket.bytesRead === before && !(socket as { _httpMessage?: unknown })._httpMessage) socket.destroy();
  });
}

/**
 * Open connections per peer address, at most `max` each (0: no cap). `take` counts a socket
 * when its address has room and releases it when the socket closes. Shared by the HTTP
 * ports and the gRPC port (runtime/grpc/server.ts).
 */
export class PerAddress {
  private readonly open = new Map<string, number>();

  constructor(readonly max: number) {}

  take(socket: Socket): boolean {
    if (this.max <= 0) return true;
    const addr = socket.remoteAddress ?? '';
    const n = this.open.get(addr) ?? 0;
    if (n >= this.max) return false;
    this.open.set(addr, n + 1);
    socket.once('close', () => {
      const left = (this.open.get(addr) ?? 1) - 1;
      if (left > 0) this.open.set(addr, left);
      else this.open.delete(addr);
    });
    return true;
  }
}

/** A parse error or timeout of one connection: answer it with a JSON body if anything can be answered. */
function answerClientError(err: NodeJS.ErrnoException, socket: Socket): void {
  if (answered.has(socket)) return;
  answered.add(socket);
  const http = socket as Socket & { _httpMessage?: { headersSent?: boolean }; parser?: unknown };
  // A reset peer, a socket already closing, a response already under way, or a TLS error
  // before HTTP started on the socket (no parser: a failed or timed-out handshake, where an
  // HTTP answer would be written into the handshake): nothing to say.
  if (err.code === 'ECONNRESET' || !socket.writable || http._httpMessage?.headersSent || !http.parser) {
    socket.destroy();
    return;
  }
  let status: number;
  let reason: string;
  let message: string;
  switch (err.code) {
    case 'HPE_HEADER_OVERFLOW':
      [status, reason] = [431, 'Request Header Fields Too Large'];
      message = 'The request head (request line and headers) is larger than 16 KiB; send smaller headers.';
      break;
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      // A connection that never sent a byte is not speaking HTTP to us: just close it, unless
      // its request is in the kernel unread (the check ran late on a busy event loop; see
      // closeIfStillIdle): then it is served, and timed again from its first byte.
      if (socket.bytesRead === 0) {
        answered.delete(socket);
        void afterNextPoll().then(() => {
          if (socket.bytesRead === 0) socket.destroy();
        });
        return;
      }
      [status, reason] = [408, 'Request Timeout'];
      message = 'The request was not received in time (--header-timeout for the head, --request-timeout for the whole request); send it again.';
      break;
    default:
      [status, reason] = [400, 'Bad Request'];
      message = `The request is not valid HTTP/1.1 (${err.code ?? err.message}).`;
  }
  endGracefully(socket, rawResponse(status, reason, new SvcError('MALFORMED', message).body()));
}
const answered = new WeakSet<Socket>();

function rawResponse(status: number, reason: string, body: Record<string, unknown>, headers: Record<string, string> = {}): string {
  const json = JSON.stringify(body);
  const extra = Object.entries(headers)
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('');
  return (
    `HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(json)}\r\n` +
    `${extra}Connection: close\r\n\r\n${json}`
  );
}

/**
 * Write the answer and end our side, but keep reading (and discarding) what the client still
 * sends: closing with unread data makes the kernel send a reset, which can reach the client
 * before it has read the answer. The client closes once it has the answer; one that does
 * not is destroyed after LINGER_MS.
 */
function endGracefully(socket: Socket, response: string): void {
  // Stop Node's HTTP parser from reading this socket (adding a 'data' listener unconsumes it).
  socket.removeAllListeners('data');
  socket.on('data', () => undefined);
  socket.on('error', () => undefined);
  socket.end(response);
  const timer = setTimeout(() => socket.destroy(), LINGER_MS);
  timer.unref();
  socket.once('close', () => clearTimeout(timer));
}
