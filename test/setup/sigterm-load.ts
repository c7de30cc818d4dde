/**
 * SIGTERM under load, as issue 31 reproduced it: `clients` loops, each sending one request
 * per fresh TCP connection (nothing reused), a signal sent mid-load, and every request's
 * fate counted from the client's side of the socket: answered (a whole HTTP response, or a
 * gRPC status), reset (ECONNRESET / EPIPE), closed without an answer, or refused
 * (ECONNREFUSED: no listener any more). A request counts as sent before the signal when its
 * bytes were handed to the kernel before `signal()` was called. Each loop stops at its first
 * refused connection, so the run ends once the gateway has stopped listening.
 *
 * The clients are raw sockets (HTTP/1.1) and node:http2 sessions (gRPC), not fetch or
 * grpc-js: those retry, pool and reconnect, which would hide what the server did.
 */
import { connect as http2Connect, constants as h2 } from 'node:http2';
import { connect } from 'node:net';

export type Fate = 'answered' | 'reset' | 'closed' | 'refused' | 'error';

export interface Attempt {
  /** When the connection was opened, the request written (ms on this process's clock). */
  openedAt: number;
  sentAt?: number;
  fate: Fate;
  /** The HTTP status, or the gRPC status code. */
  status?: number;
  code?: string;
}

export interface Figures {
  /** Requests written before the signal, and what became of them. */
  before: {
    sent: number;
    answered: number;
    reset: number;
    closed: number;
    error: number;
    statuses: Record<string, number>;
    closedCodes: Record<string, number>;
    /** The messages of answers that were not the expected success (gRPC's grpc-message), and how many of each. */
    failures: Record<string, number>;
  };
  /** Requests not yet sent when the signal came (opened after it, or opened just before and not yet written). */
  after: { opened: number; answered: number; refused: number; reset: number; closed: number; error: number };
  attempts: Attempt[];
}

export interface LoadOptions {
  clients: number;
  /** Client `c`'s `n`-th request, on a fresh connection: `httpAttempt` or `grpcAttempt`. */
  attempt(c: number, n: number): Promise<Attempt>;
  /** Send the signal once this many requests have been answered. */
  warmup: number;
  signal(): void;
  /** Give up (the loops stop) this long after the signal. */
  afterSignalMs?: number;
}

const resetCodes = new Set(['ECONNRESET', 'EPIPE']);

/** One HTTP/1.1 request (complete, with `Connection: close`) on a fresh connection; resolves once the socket has closed. */
export function httpAttempt(port: number, request: string): Promise<Attempt> {
  return new Promise((resolve) => {
    const a: Attempt = { openedAt: performance.now(), fate: 'closed' };
    const socket = connect({ port, host: '127.0.0.1', noDelay: true });
    let data = '';
    let errCode: string | undefined;
    socket.setEncoding('latin1');
    socket.on('connect', () => {
      socket.write(request, () => {
        a.sentAt ??= performance.now();
      });
      // Written to the kernel at once (a small request on a fresh socket): sent now.
      if (socket.writableLength === 0) a.sentAt = performance.now();
    });
    socket.on('data', (d: string) => (data += d));
    socket.on('error', (e: NodeJS.ErrnoException) => (errCode ??= e.code ?? e.message));
    socket.on('close', () => {
      const complete = responseComplete(data);
      if (complete) {
        a.fate = 'answered';
        a.status = complete.status;
      } else if (errCode === 'ECONNREFUSED') a.fate = 'refused';
      else if (errCode && resetCodes.has(errCode)) a.fate = 'reset';
      else if (errCode) a.fate = 'error';
      if (errCode) a.code = errCode;
      resolve(a);
    });
  });
}

/** The status of a complete response (head and Content-Length body), or undefined. */
function responseComplete(raw: string): { status: number } | undefined {
  const end = raw.indexOf('\r\n\r\n');
  if (end < 0) return undefined;
  const head = raw.slice(0, end);
  const m = /^HTTP\/1\.1 (\d{3})/.exec(head);
  if (!m) return undefined;
  const len = /\r\ncontent-length:\s*(\d+)/i.exec(head);
  if (len && Buffer.byteLength(raw.slice(end + 4), 'latin1') < Number(len[1])) return undefined;
  return { status: Number(m[1]) };
}

/**
 * One unary gRPC call on a fresh HTTP/2 connection: `message` is the serialized request,
 * framed here. Answered once a grpc-status arrives; a stream the server refused (GOAWAY
 * before it was read, REFUSED_STREAM) is `closed` with that code.
 */
export function grpcAttempt(port: number, path: string, message: Buffer, metadata: Record<string, string>): Promise<Attempt> {
  return new Promise((resolve) => {
    const a: Attempt = { openedAt: performance.now(), fate: 'closed' };
    const session = http2Connect(`http://127.0.0.1:${port}`);
    let errCode: string | undefined;
    let rst: number | undefined;
    let headers = false;
    let goaway: string | undefined;
    session.on('goaway', (code: number, lastStreamId: number) => (goaway ??= `code ${code} last stream ${lastStreamId}`));
    session.on('error', (e: NodeJS.ErrnoException) => (errCode ??= e.code ?? e.message));
    session.on('connect', () => {
      const stream = session.request({
        ':method': 'POST',
        ':path': path,
        'content-type': 'application/grpc',
        te: 'trailers',
        ...metadata,
      });
      const status = (h: Record<string, unknown>) => {
        headers = true;
        if (h['grpc-status'] !== undefined) a.status = Number(h['grpc-status']);
        // A failed call's message: what a failure of the test prints (describeFigures).
        if (h['grpc-message'] !== undefined && a.status !== 0) a.code = decodeURIComponent(String(h['grpc-message']));
      };
      stream.on('response', status);
      stream.on('trailers', status);
      stream.on('data', () => undefined);
      stream.on('error', (e: NodeJS.ErrnoException) => (errCode ??= e.code ?? e.message));
      stream.on('close', () => {
        rst = stream.rstCode;
        session.close();
      });
      const frame = Buffer.alloc(5 + message.length);
      frame.writeUInt32BE(message.length, 1);
      message.copy(frame, 5);
      stream.end(frame, () => {
        a.sentAt ??= performance.now();
      });
    });
    session.on('close', () => {
      if (a.status !== undefined) a.fate = 'answered';
      else if (errCode === 'ECONNREFUSED') a.fate = 'refused';
      else if (errCode && resetCodes.has(errCode)) a.fate = 'reset';
      else if (rst === h2.NGHTTP2_REFUSED_STREAM) a.code = 'REFUSED_STREAM';
      else if (errCode) a.fate = 'error';
      // Any other way the stream ended unanswered: its RST code (NO_ERROR 0, CANCEL 8, …),
      // whether the answer's headers had come, and whether the server sent GOAWAY first.
      else a.code = `rst ${rst ?? 'none'}${headers ? ', headers seen' : ''}${goaway !== undefined ? `, goaway ${goaway}` : ''}`;
      if (errCode) a.code = errCode;
      resolve(a);
    });
  });
}

export async function sigtermUnderLoad(opts: LoadOptions): Promise<Figures> {
  const attempts: Attempt[] = [];
  let answered = 0;
  let signalledAt = Infinity;
  let warmedUp: () => void = () => undefined;
  const warm = new Promise<void>((r) => (warmedUp = r));
  const loop = async (c: number) => {
    for (let n = 0; ; n++) {
      if (performance.now() - signalledAt > (opts.afterSignalMs ?? 30_000)) return;
      const a = await opts.attempt(c, n);
      attempts.push(a);
      if (a.fate === 'answered' && ++answered >= opts.warmup) warmedUp();
      if (a.fate === 'refused') return;
    }
  };
  const loops = Array.from({ length: opts.clients }, (_, c) => loop(c));
  await warm;
  signalledAt = performance.now();
  opts.signal();
  await Promise.all(loops);

  const sentBefore = attempts.filter((a) => a.sentAt !== undefined && a.sentAt < signalledAt);
  const notSent = attempts.filter((a) => !sentBefore.includes(a));
  const count = (list: Attempt[], fate: Fate) => list.filter((a) => a.fate === fate).length;
  /** How many of `list` give each key (undefined: not counted). */
  const tally = (list: Attempt[], key: (a: Attempt) => string | undefined) => {
    const n: Record<string, number> = {};
    for (const a of list) {
      const k = key(a);
      if (k !== undefined) n[k] = (n[k] ?? 0) + 1;
    }
    return n;
  };
  const statuses = tally(sentBefore, (a) => a.status?.toString());
  // How the requests sent before the signal but closed unanswered ended (RST code or socket error).
  const closedCodes = tally(sentBefore, (a) => (a.fate === 'closed' ? (a.code ?? 'none') : undefined));
  const failures = tally(sentBefore, (a) => (a.fate === 'answered' && a.code !== undefined ? `${a.status}: ${a.code}` : undefined));
  return {
    before: {
      sent: sentBefore.length,
      answered: count(sentBefore, 'answered'),
      reset: count(sentBefore, 'reset'),
      closed: count(sentBefore, 'closed'),
      error: count(sentBefore, 'error'),
      statuses,
      closedCodes,
      failures,
    },
    after: {
      opened: notSent.length,
      answered: count(notSent, 'answered'),
      refused: count(notSent, 'refused'),
      reset: count(notSent, 'reset'),
      closed: count(notSent, 'closed'),
      error: count(notSent, 'error'),
    },
    attempts,
  };
}

/** One line of figures for the test's output and the issue's closing note. */
export function describeFigures(what: string, f: Figures): string {
  const { before: b, after: a } = f;
  return (
    `${what}: ${b.sent} requests sent before the signal: ${b.answered} answered ${JSON.stringify(b.statuses)}, ${b.reset} reset, ` +
    `${b.closed} closed unanswered${b.closed ? ` ${JSON.stringify(b.closedCodes)}` : ''}, ${b.error} other errors` +
    `${Object.keys(b.failures).length ? ` (failed answers: ${JSON.stringify(b.failures)})` : ''}; ${a.opened} not yet sent at the signal: ${a.answered} answered, ` +
    `${a.refused} refused, ${a.reset} reset, ${a.closed} closed unanswered, ${a.error} other errors`
  );
}
