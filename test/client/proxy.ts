/**
 * A TCP proxy in front of a test gateway that can cut connections: every open one now
 * (`cutAll`), or the next one right after the request has reached the gateway and before
 * its answer reaches the client (`cutNextAnswer`: the write happened, the acknowledgement is
 * lost). Real sockets on both sides, port 0.
 */
import { createServer, connect, type Socket } from 'node:net';

export interface CutProxy {
  url: string;
  /** Destroys every open client connection (and its gateway side). */
  cutAll(): void;
  /** The next answer whose first bytes match `match` (default: any) is dropped with its connection. */
  cutNextAnswer(match?: RegExp): Promise<void>;
  /** While on, every connection is cut as soon as it is accepted (the target looks down). */
  refuse(on: boolean): void;
  /** Connections accepted so far. */
  connections(): number;
  close(): Promise<void>;
}

export async function startCutProxy(target: string): Promise<CutProxy> {
  const t = new URL(target);
  const open = new Set<Socket>();
  let accepted = 0;
  let pendingCut: { match: RegExp; done: () => void } | undefined;
  let refusing = false;
  const server = createServer((client) => {
    accepted++;
    if (refusing) {
      client.destroy();
      return;
    }
    const upstream = connect(Number(t.port), t.hostname);
    open.add(client);
    const forget = () => {
      open.delete(client);
      client.destroy();
      upstream.destroy();
    };
    client.on('error', forget).on('close', forget);
    upstream.on('error', forget).on('close', forget);
    client.on('data', (b) => upstream.write(b));
    upstream.on('data', (b) => {
      const cut = pendingCut;
      if (cut && cut.match.test(b.toString('latin1'))) {
        pendingCut = undefined;
        forget();
        cut.done();
        return;
      }
      client.write(b);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const addr = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${addr.port}`,
    cutAll() {
      for (const s of open) s.destroy();
    },
    cutNextAnswer(match = /^HTTP\//) {
      return new Promise<void>((done) => {
        pendingCut = { match, done };
      });
    },
    refuse(on) {
      refusing = on;
      if (on) for (const s of open) s.destroy();
    },
    connections: () => accepted,
    close() {
      for (const s of open) s.destroy();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
