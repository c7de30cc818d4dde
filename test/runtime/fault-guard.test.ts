/**
 * No error may end the process (issue 10, defect 1): an exception or a rejection that escapes
 * every request and callback is logged and the gateway keeps serving. Here a real
 * `kslate serve` is given a module (through NODE_OPTIONS) that throws from a timer and leaves
 * a promise rejected, the way a fault in a driver's socket handler would.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { children, cleanEnv, ensureBuilt, start, stop } from '../setup/cli.js';
import { freshDatabase, type TestDb } from '../setup/db.js';
import { freePort } from '../setup/ports.js';

let db: TestDb;
beforeAll(async () => {
  await ensureBuilt();
  db = await freshDatabase();
}, 150_000);
afterAll(async () => {
  await Promise.all([...children].map((c) => stop(c).catch(() => undefined)));
  await db?.drop();
});

it('an uncaught exception and an unhandled rejection are logged; the gateway keeps answering', async () => {
  const [port, metricsPort] = [await freePort(), await freePort()];
  // The faults fire on SIGUSR2, sent once the gateway listens (and so has its guard): a fixed
  // delay after the process started raced a slow start on a loaded machine.
  const fault = encodeURIComponent(
    "process.on('SIGUSR2', () => { setTimeout(() => { throw new Error('fault-from-a-socket-handler') }, 0); setTimeout(() => { Promise.reject(new Error('fault-in-a-promise')) }, 10); });",
  );
  const served = await start(
    [
      'serve',
      '--database-url', db.url,
      '--identity', 'apikey',
      '--apikeys', 'examples/apikeys.yaml',
      '--classes', 'examples/classes',
      '--listen', `127.0.0.1:${port}`,
      '--metrics-port', String(metricsPort),
    ],
    cleanEnv({ NODE_OPTIONS: `--import=data:text/javascript,${fault}` }),
  );
  served.child.kill('SIGUSR2');
  const out0 = () => served.stdout() + served.stderr();
  for (let i = 0; i < 200 && !(/fault-in-a-promise/.test(out0()) && /fault-from-a-socket-handler/.test(out0())); i++) {
    await new Promise((r) => setTimeout(r, 50));
  }
  await new Promise((r) => setTimeout(r, 200));
  expect(served.child.exitCode).toBeNull();
  const res = await fetch(`http://127.0.0.1:${port}/v1/classes`, { headers: { authorization: 'Bearer alice-dev-key' } });
  expect(res.status).toBe(200);
  const out = served.stdout() + served.stderr();
  expect(out).toMatch(/uncaught exception: the gateway keeps running/);
  expect(out).toMatch(/fault-from-a-socket-handler/);
  expect(out).toMatch(/unhandled promise rejection: the gateway keeps running/);
  expect(out).toMatch(/fault-in-a-promise/);
}, 60_000);
