/**
 * The last net of a long-running process (serve, dev): an error that escaped every request
 * and callback is logged with what to do, and the process keeps serving. Node's default is to
 * exit, which turned one bad request into an outage of every replica that served it. Each
 * request answers its own faults (500/503) before this net; nothing is expected to land here.
 */
import type { Logger } from '../handlers/context.js';
import { describeError } from './describe-error.js';

export function guardFaults(log: Logger): void {
  const report = (kind: string) => (e: unknown) => {
    try {
      log.error(`${kind}: the gateway keeps running; please report this with the lines around it`, {
        error: describeError(e),
      });
    } catch {
      // Logging itself failed; there is nothing safer left to do than to keep going.
    }
  };
  process.on('uncaughtException', report('uncaught exception'));
  process.on('unhandledRejection', report('unhandled promise rejection'));
}
