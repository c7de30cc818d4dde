/**
 * The Workers logger: one JSON line per event on the console (Workers Logs and `wrangler
 * tail` index it), the same fields as the Node logger's JSON mode. tslog is not bundled.
 */
import type { Logger } from '../../handlers/context.js';

const LEVELS: Record<string, number> = { debug: 2, info: 3, warn: 4, error: 5 };

export function consoleLogger(level = 'info'): Logger {
  const min = LEVELS[level] ?? 3;
  const line = (lvl: keyof typeof LEVELS, write: (s: string) => void) => (msg: string, data?: Record<string, unknown>) => {
    if (LEVELS[lvl]! < min) return;
    write(JSON.stringify({ time: new Date().toISOString(), level: lvl, msg, ...data }));
  };
  return {
    debug: line('debug', (s) => console.debug(s)),
    info: line('info', (s) => console.log(s)),
    warn: line('warn', (s) => console.warn(s)),
    error: line('error', (s) => console.error(s)),
  };
}
