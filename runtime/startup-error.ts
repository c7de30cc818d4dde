/**
 * The errors a start stops with, in a module of their own so the CLI can tell them apart (exit
 * code, one line) without loading the gateway: `kslate help` and `--help` stay cheap.
 */

/** The process cannot start as configured; the message says what to change. Exit code 2. */
export class StartupError extends Error {
  readonly exitCode: number = 2;
}

/** Something this start needs is held by another process (a port, `kslate dev`'s data directory). Exit code 1. */
export class InUseError extends StartupError {
  override readonly exitCode: number = 1;
}

/**
 * A database that does not match --database-mode (db/migrate.ts DatabaseModeError, told apart
 * by name so this module loads nothing) stops the start; any other error passes through.
 */
export function modeFatal(e: unknown): never {
  if (e instanceof Error && e.name === 'DatabaseModeError') throw new StartupError(e.message);
  throw e;
}

/** A port the gateway (or `kslate dev`'s PostgreSQL) should listen on is taken. Exit code 1. */
export class PortInUseError extends InUseError {}

/** EADDRINUSE (also inside gRPC's bind message) becomes one line naming the port and its setting. */
export function portInUse(e: unknown, port: number, setting: string): unknown {
  const code = (e as { code?: unknown } | null)?.code;
  const message = e instanceof Error ? e.message : String(e);
  if (code === 'EADDRINUSE' || /EADDRINUSE/.test(message)) {
    return new PortInUseError(`port ${port} is already in use (${setting}); stop what holds it or choose another port.`);
  }
  return e;
}
