/**
 * tslog behind the handlers' Logger port: pretty on a TTY; otherwise one flat JSON object per
 * line (`time`, `level`, `msg`, then the data keys), which log collectors index directly.
 */
import { Logger as TsLogger } from 'tslog';
import type { Logger } from '../handlers/context.js';

const LEVELS: Record<string, number> = { silly: 0, trace: 1, debug: 2, info: 3, warn: 4, error: 5, fatal: 6, silent: 7 };

export function createLogger(
  opts: { level?: string; json?: boolean; name?: string; write?: (line: string) => void } = {},
): Logger {
  const json = opts.json ?? !process.stdout.isTTY;
  const minLevel = LEVELS[opts.level ?? 'info'] ?? 3;
  if (json) {
    // One flat JSON line per entry, written directly: tslog's pipeline (a masked deep copy of
    // the arguments, its meta object) cost more than the line on the request path (an
    // access-log line per request); tslog renders the pretty TTY output.
    const write = opts.write ?? batchedStdout();
    const line = (level: string, n: number) => (msg: string, data?: Record<string, unknown>) => {
      if (n < minLevel) return;
      write(JSON.stringify({ time: new Date().toISOString(), level, msg, ...data }) + '\n');
    };
    return { debug: line('debug', 2), info: line('info', 3), warn: line('warn', 4), error: line('error', 5) };
  }
  const log = new TsLogger<unknown>({
    name: opts.name ?? 'kslate',
    type: 'pretty',
    minLevel,
    hideLogPositionForProduction: true,
  });
  const call = (fn: (...args: unknown[]) => unknown) => (msg: string, data?: Record<string, unknown>) => {
    if (data) fn(msg, data);
    else fn(msg);
  };
  return {
    debug: call(log.debug.bind(log)),
    info: call(log.info.bind(log)),
    warn: call(log.warn.bind(log)),
    error: call(log.error.bind(log)),
  };
}

/**
 * Lines written to stdout together once per turn of the event loop: with an access-log line
 * per request, one write (a syscall, and a wake-up of whatever reads the pipe) per request
 * cost more than the line itself. Lines still buffered when the process exits are written then.
 */
function batchedStdout(): (line: string) => void {
  let pending: string[] = [];
  let scheduled = false;
  const flush = () => {
    scheduled = false;
    if (pending.length === 0) return;
    const text = pending.join('');
    pending = [];
    process.stdout.write(text);
  };
  process.once('exit', flush);
  return (line) => {
    pending.push(line);
    if (pending.length >= 256) flush();
    else if (!scheduled) {
      scheduled = true;
      setImmediate(flush);
    }
  };
}
