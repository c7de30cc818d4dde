/**
 * SIGTERM and SIGINT for the long-running commands (serve, dev): the first signal stops
 * gracefully and exits 0; a second one during the stop exits at once, saying so.
 */
import type { Logger } from '../handlers/context.js';

export function stopOnSignals(log: Logger, stop: (signal: NodeJS.Signals) => Promise<void>): void {
  let stopping = false;
  const onSignal = (signal: NodeJS.Signals) => {
    if (stopping) {
      log.warn(`${signal} again: exiting now without waiting for requests in flight`);
      process.exit(1);
    }
    stopping = true;
    stop(signal).then(
      () => {
        log.info('stopped');
        process.exit(0);
      },
      (e: unknown) => {
        log.error('stopping failed; exiting anyway', { error: e instanceof Error ? e.message : String(e) });
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
}
