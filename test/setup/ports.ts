import { createServer } from 'node:net';

/**
 * Ports handed out by `freePort`, below Linux's ephemeral range (32768–60999 by default):
 * the kernel never gives one of these to a `listen(0)` or to an outgoing connection's local
 * end, so a port found free here stays free until the test binds it. `listen(0)` then close
 * (what this did before) let another file's gateway or any client connection take the port
 * in between, which failed a gateway's start with EADDRINUSE once files ran in parallel.
 * Each vitest worker (VITEST_POOL_ID 1…N; the global setup has none) has its own block, so
 * two files running at once never pick the same port, and picks at random within it, so two
 * vitest runs on one machine (a suite beside another) rarely meet: a port found taken is
 * skipped, and none is handed out twice by one process.
 */
const FIRST = 20_000;
const BLOCK = 500;
const BLOCKS = 24; // 20000–31999, below the ephemeral range
const pool = Number(process.env.VITEST_POOL_ID ?? 0) % BLOCKS;
const base = FIRST + pool * BLOCK;
const given = new Set<number>();

function bindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.once('error', () => resolve(false));
    srv.listen({ port, host: '127.0.0.1', exclusive: true }, () => srv.close(() => resolve(true)));
  });
}

/** A TCP port free on loopback, from this worker's own block (see above). */
export async function freePort(): Promise<number> {
  for (let i = 0; i < BLOCK * 2; i++) {
    const port = base + Math.floor(Math.random() * BLOCK);
    if (given.has(port)) continue;
    // A port held by something else on the machine (or by a gateway an earlier file left
    // closing) is skipped.
    if (await bindable(port)) {
      given.add(port);
      return port;
    }
  }
  throw new Error(`no free port in ${base}–${base + BLOCK - 1}: is something holding this worker's block?`);
}
