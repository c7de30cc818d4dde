/** tslog behind the handlers' Logger port: pretty on a TTY, JSON lines otherwise. */
import { Logger as TsLogger } from 'tslog';
import type { Logger } from '../handlers/context.js';

const LEVELS: Record<string, number> = { silly: 0, trace: 1, debug: 2, info: 3, warn: 4, error: 5, fatal: 6, silent: 7 };

export function createLogger(opts: { level?: string; json?: boolean; name?: string } = {}): Logger {
  const json = opts.json ?? !process.stdout.isTTY;
  const minLevel = LEVELS[opts.level ?? 'info'] ?? 3;
  const log = new TsLogger<unknown>({
    name: opts.name ?? 'kslate',
    type: json ? 'json' : 'pretty',
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
