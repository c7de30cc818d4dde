/**
 * Waiting in tests without a clock of their own: on the gateway's events (a log line, a
 * process's output), or on a probe repeated until it holds. None sets a deadline; the
 * test's own timeout bounds the wait, so a loaded machine makes a test slower, not red.
 */
import type { Logger } from '../../handlers/context.js';
import type { Served } from './cli.js';
import { quietLog } from './gateway.js';

/** A logger that keeps every message and lets a test wait for one (the gateway's own event). */
export function eventLog(base: Logger = quietLog) {
  const messages: string[] = [];
  const waiters: { re: RegExp; resolve: (msg: string) => void }[] = [];
  const record = (msg: string) => {
    messages.push(msg);
    for (const w of waiters.splice(0)) {
      if (w.re.test(msg)) w.resolve(msg);
      else waiters.push(w);
    }
  };
  const log: Logger = {
    debug: (msg, data) => (record(msg), base.debug(msg, data)),
    info: (msg, data) => (record(msg), base.info(msg, data)),
    warn: (msg, data) => (record(msg), base.warn(msg, data)),
    error: (msg, data) => (record(msg), base.error(msg, data)),
  };
  return {
    log,
    messages,
    /** Resolves with the first message matching `re` logged from now on. */
    next: (re: RegExp) => new Promise<string>((resolve) => waiters.push({ re, resolve })),
  };
}

/** Resolves once the process's stdout matches `re` (checked as each chunk arrives); rejects if it exits first. */
export function outputMatches(served: Served, re: RegExp): Promise<void> {
  if (re.test(served.stdout())) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const check = () => {
      if (!re.test(served.stdout())) return;
      served.child.stdout!.off('data', check);
      resolve();
    };
    served.child.stdout!.on('data', check);
    void served.exited.then(() => {
      served.child.stdout!.off('data', check);
      if (re.test(served.stdout())) resolve();
      else reject(new Error(`the process exited before its output matched ${re}\nstdout: ${served.stdout()}`));
    });
  });
}

/**
 * Repeat `probe` until `ok` holds for its answer and return that answer. For states that
 * announce themselves nowhere (a PostgreSQL session waiting on a lock, a metric): each try
 * starts after the last one answered, with no deadline but the test's.
 */
export async function settled<T>(probe: () => Promise<T>, ok: (v: T) => boolean): Promise<T> {
  for (;;) {
    const v = await probe();
    if (ok(v)) return v;
    await new Promise((r) => setTimeout(r, 20));
  }
}
