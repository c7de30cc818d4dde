/**
 * Readiness: 200 when the expected schema version is present. When it is missing, the
 * schema is (re-)applied in the background — once at a time — and the answer is 503 meanwhile.
 */
import type pg from 'pg';
import { migrate, schemaVersion, SCHEMA_VERSION } from '../db/migrate.js';
import { classifyDbError } from '../db/errors.js';
import type { Logger } from '../handlers/context.js';

export class Readiness {
  private applying: Promise<void> | null = null;

  constructor(
    private readonly pool: pg.Pool,
    private readonly log: Logger,
    /** Runs after the schema was (re-)applied: reconcile classes, drop caches. */
    private readonly afterApply: () => Promise<void>,
  ) {}

  async check(): Promise<{ ready: true } | { ready: false; message: string }> {
    // Not ready until a re-apply has finished with its follow-up (class reconcile): the
    // schema alone, with an empty class table, would answer NOT_FOUND to every record.
    if (this.applying) {
      return { ready: false, message: `The database schema (version ${SCHEMA_VERSION}) is being applied; retry shortly.` };
    }
    try {
      const v = await schemaVersion(this.pool);
      if (v !== null && v >= SCHEMA_VERSION) return { ready: true };
      this.ensureSchema();
      return {
        ready: false,
        message: `The database schema (version ${SCHEMA_VERSION}) is missing and is being applied; retry shortly.`,
      };
    } catch (e) {
      return {
        ready: false,
        message: classifyDbError(e)
          ? 'The database is unreachable; the gateway reconnects by itself when it is back.'
          : `Readiness check failed: ${(e as Error).message}`,
      };
    }
  }

  /** Apply the schema unless already applying; never throws (logs what to do instead). */
  ensureSchema(): Promise<void> {
    if (!this.applying) {
      this.applying = migrate(this.pool)
        .then(async ({ applied }) => {
          if (applied.length > 0) this.log.info('database schema applied', { versions: applied });
          await this.afterApply();
        })
        .catch((e) => {
          this.log.warn('could not apply the database schema yet; will retry on the next request', {
            error: (e as Error).message,
          });
        })
        .finally(() => {
          this.applying = null;
        });
    }
    return this.applying;
  }
}
