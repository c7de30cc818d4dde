/**
 * Stopping without losing a request already sent (issue 31; docs/architecture.md, "Time
 * bounds and stopping"). Two rules, shared by the HTTP and gRPC ports:
 *
 * - A listening socket is closed only after the connections the kernel has already
 *   completed are taken: closing it resets every connection still in its accept queue,
 *   and under load that queue holds most of the clients that have just connected and
 *   written their request (`stopListening`).
 * - A connection that has sent bytes gets its answer; only one that stays silent for
 *   `DRAIN_GRACE_MS` is closed (`trackConnections` for HTTP, the gRPC port's own preface
 *   wait in runtime/grpc/server.ts).
 */
import { readFileSync } from 'node:fs';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { Server as NetServer, type Socket } from 'node:net';

/**
 * How long a connection may stay silent once a stop has begun before it is closed: time for
 * a client that connected just before the signal to write its request, and for a keep-alive
 * client that has just had an answer to send its next one (answered with Connection: close).
 */
export const DRAIN_GRACE_MS = 1_000;

/**
 * Resolves in the check phase that follows the event loop's next poll phase: by then every
 * byte that had reached an open socket before the call has been read (libuv reads every
 * readable socket each time it polls; it accepts only one new connection, see stopListening).
 */
export function afterNextPoll(): Promise<void> {
  return new Promise((resolve) => setImmediate(() => setImmediate(resolve)));
}

/**
 * Stop listening without resetting a connection the kernel has already completed. Closing
 * a listening socket resets every connection still in its accept queue, and under load that
 * queue is long: libuv (1.45 and later, so Node 20.3+) accepts one connection per event-loop
 * iteration, and an iteration of a busy gateway takes tens of milliseconds, so clients that
 * connected and wrote their request wait there. So the queue as it stands now is taken
 * first (it is FIFO: once that many connections have been accepted, every one queued before
 * the stop has been), then the socket is closed; a connection that arrives after that is
 * refused by the kernel (ECONNREFUSED), which a client can retry elsewhere. The length comes
 * from the kernel's socket table (`acceptQueueLength`); where it cannot be read, accepting
 * goes on until an iteration finds the queue empty. Either way for at most `budgetMs`:
 * connections that keep arriving cannot hold the port open. Connections accepted meanwhile
 * are served like any other (with Connection: close, once `trackConnections` drains).
 * Open connections are left alone (node:http's own close() would also close its idle ones
 * at once; `trackConnections` gives them their grace).
 */
export async function stopListening(server: NetServer, budgetMs: number): Promise<{ queued?: number; accepted: number }> {
  if (!server.listening) return { accepted: 0 };
  const address = server.address();
  const queued = address && typeof address === 'object' ? acceptQueueLength(address.port) : undefined;
  let accepted = 0;
  const count = () => void accepted++;
  server.on('connection', count);
  try {
    const until = Date.now() + budgetMs;
    while (queued === undefined || accepted < queued) {
      const before = accepted;
      await afterNextPoll();
      // A whole iteration, poll phase included, accepted nothing: the queue was empty.
      if (accepted === before || Date.now() >= until) break;
    }
  } finally {
    server.off('connection', count);
  }
  if (server.listening) NetServer.prototype.close.call(server);
  return { ...(queued === undefined ? {} : { queued }), accepted };
}

/**
 * How many connections wait in the accept queue of the listening socket(s) on `port`, from
 * Linux's socket table (/proc/net/tcp and tcp6: for a listening socket, state 0A, the
 * rx_queue column is its accept queue); undefined where the table cannot be read.
 */
export function acceptQueueLength(port: number): number | undefined {
  let total: number | undefined;
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let table: string;
    try {
      table = readFileSync(file, 'latin1');
    } catch {
      continue;
    }
    total ??= 0;
    for (const line of table.split('\n').slice(1)) {
      // sl local_address rem_address st tx_queue:rx_queue ...
      const [, local, , state, queues] = line.trim().split(/\s+/);
      if (state !== '0A' || !local || !queues) continue;
      if (parseInt(local.slice(local.lastIndexOf(':') + 1), 16) !== port) continue;
      total += parseInt(queues.slice(queues.indexOf(':') + 1), 16) || 0;
    }
  }
  return total;
}

/** What `trackConnections` reports and does for the API server's graceful stop. */
export interface ConnectionDrain {
  /** Requests whose response has not finished. */
  requests(): number;
  /** Open connections (TCP), answered or not. */
  connections(): number;
  /**
   * From now on every response not yet started carries Connection: close, and a connection
   * is closed once it has been silent for `graceMs`: no response under way and no byte
   * received since its last answer (or since it was accepted). One that has sent part of a
   * request keeps it: it is answered, or ended by --header-timeout / --request-timeout.
   */
  drain(graceMs: number): void;
  /** Resolves true once every connection has closed, false when `ms` passed first. */
  closed(ms: number): Promise<boolean>;
}

interface HttpConn {
  /** Responses under way on this connection. */
  busy: number;
  /** `bytesRead` when it was last answered (0 before): more means a request is arriving. */
  heard: number;
  timer?: NodeJS.Timeout;
}

/**
 * Follows the connections and requests of an HTTP(S) server for its graceful stop. With TLS
 * an HTTP connection is the TLS socket (`secureConnection`), whose `bytesRead` counts
 * decrypted bytes; a TCP connection still in its handshake counts as having spoken unless
 * it has sent nothing at all.
 */
export function trackConnections(server: Server, tls: boolean): ConnectionDrain {
  const tcp = new Set<Socket>();
  const http = new Map<Socket, HttpConn>();
  const open = new Set<ServerResponse>();
  let graceMs = -1; // draining once >= 0
  let waiters: (() => void)[] = [];

  const settle = () => {
    if (tcp.size > 0) return;
    for (const w of waiters) w();
    waiters = [];
  };
  /** Close `socket` if it is still silent once whatever had reached the kernel has been read. */
  const closeIfSilent = (socket: Socket) =>
    void afterNextPoll().then(() => {
      const c = http.get(socket);
      const silent = c ? c.busy === 0 && socket.bytesRead === c.heard : socket.bytesRead === 0;
      if (silent) socket.destroy();
    });
  /** (Re)start the grace of an HTTP connection with no response under way. */
  const arm = (socket: Socket) => {
    const c = http.get(socket);
    if (!c || c.busy > 0) return;
    clearTimeout(c.timer);
    c.timer = setTimeout(() => closeIfSilent(socket), graceMs);
  };
  /** A TLS connection still in its handshake: closed after the grace if it never sent a byte. */
  const armHandshake = (socket: Socket) => {
    const t = setTimeout(() => closeIfSilent(socket), graceMs);
    socket.once('close', () => clearTimeout(t));
  };

  const follow = (socket: Socket) => {
    http.set(socket, { busy: 0, heard: 0 });
    socket.once('close', () => {
      clearTimeout(http.get(socket)?.timer);
      http.delete(socket);
    });
    if (graceMs >= 0) arm(socket);
  };
  server.on('connection', (socket: Socket) => {
    tcp.add(socket);
    socket.once('close', () => {
      tcp.delete(socket);
      settle();
    });
    if (!tls) follow(socket);
    else if (graceMs >= 0) armHandshake(socket);
  });
  if (tls) server.on('secureConnection', follow);

  // Prepended: it must run before the app's listener can write the response head.
  server.prependListener('request', (req: IncomingMessage, res: ServerResponse) => {
    const socket = req.socket;
    const c = http.get(socket);
    open.add(res);
    if (c) {
      c.busy++;
      clearTimeout(c.timer);
    }
    if (graceMs >= 0) res.setHeader('connection', 'close');
    res.once('close', () => {
      open.delete(res);
      if (!c) return;
      c.busy--;
      c.heard = socket.bytesRead;
      // A response begun before the stop ends without Connection: close; its connection gets the grace too.
      if (graceMs >= 0 && !socket.destroyed) arm(socket);
    });
  });

  return {
    requests: () => open.size,
    connections: () => tcp.size,
    drain(ms) {
      if (graceMs >= 0) return;
      graceMs = ms;
      for (const res of open) if (!res.headersSent) res.setHeader('connection', 'close');
      for (const socket of http.keys()) arm(socket);
      if (tls) for (const socket of tcp) armHandshake(socket);
    },
    closed(ms) {
      if (tcp.size === 0) return Promise.resolve(true);
      return new Promise((resolve) => {
        const t = setTimeout(() => resolve(false), ms);
        waiters.push(() => {
          clearTimeout(t);
          resolve(true);
        });
      });
    },
  };
}
