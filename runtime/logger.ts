/**
 * tslog behind the handlers' Logger port: pretty on a TTY; otherwise one flat JSON object per
 * line (`time`, `level`, `msg`, then the data keys), which log collectors index directly.
 */
import { Logger as TsLogger, type ILogObjMeta } from 'tslog';
import type { Logger } from '../handlers/context.js';

const LEVELS: Record<string, number> = { silly: 0, trace: 1, debug: 2, info: 3, warn: 4, error: 5, fatal: 6, silent: 7 };

export function createLogger(
  opts: { level?: string; json?: boolean; name?: string; write?: (line: string) => void } = {},
): Logger {
  const json = opts.json ?? !process.stdout.isTTY;
  const minLevel = LEVELS[opts.level ?? 'info'] ?? 3;
  const log = new TsLogger<unknown>({
    name: opts.name ?? 'kslate',
    type: json ? 'hidden' : 'pretty',
    minLevel,
    hideLogPositionForProduction: true,
  });
  if (json) {
    const write = opts.write ?? batchedStdout();
    log.attachTransport((logObj) => {
      const obj = logObj as unknown as Record<string, unknown>;
      const meta = (obj as unknown as ILogObjMeta)._meta;
      const data = obj['1'] && typeof obj['1'] === 'object' ? (obj['1'] as Record<string, unknown>) : {};
      write(
        JSON.stringify({
          time: meta.date instanceof Date ? meta.date.toISOString() : meta.date,
          level: meta.logLevelName.toLowerCase(),
          msg: obj['0'],
          ...data,
        }) + '\n',
      );
    });
  }
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
