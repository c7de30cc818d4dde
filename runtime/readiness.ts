/**
 * Readiness: 200 when the expected schema version is present. When it is missing, the
 * schema is (re-)applied in the background — once at a time — and the answer is 503 meanwhile.
 * A stopping gateway is not ready (draining), and a database that does not answer within
 * CHECK_TIMEOUT_MS makes it not ready rather than hanging the probe.
 */
import type pg from 'pg';
import { migrate, schemaVersion, SCHEMA_VERSION, type DatabaseMode } from '../db/migrate.js';
import { classifyDbError, READ_ONLY } from '../db/errors.js';
import type { Logger } from '../handlers/context.js';

/** How long a probe waits for the database: a frozen server answers 503 instead of hanging. */
export const CHECK_TIMEOUT_MS = 2_000;

/** Ready, perhaps with warnings an operator should act on (a primary without a synchronous standby); or not, and why. */
type Answer = { ready: true; warnings?: string[] } | { ready: false; message: string };

export class Readiness {
  private applying: Promise<void> | null = null;
  private draining = false;
  /** The database check under way: concurrent probes share it rather than piling up queries. */
  private pending: Promise<Answer> | null = null;

  constructor(
    /** The requests' pool: the probe is as bounded as a request. */
    private readonly pool: pg.Pool,
    /** Where the schema is applied: migrations are not held to the requests' budget. */
    private readonly migrationPool: pg.Pool,
    private readonly log: Logger,
    /** Runs after the schema was (re-)applied: reconcile classes, drop caches. */
    private readonly afterApply: () => Promise<void>,
    /** Why something besides the database keeps the gateway from serving (an identity provider), or null. */
    private readonly otherProblem: () => string | null = () => null,
    /**
     * Why a failover could lose acknowledged writes (db/kysely/primary.ts replicationRisk), or
     * null; absent with --allow-async-replication.
     */
    private readonly replicationRisk?: () => Promise<string | null>,
    /** Standbys reads skip now (down, or lagging past --replica-max-lag): still ready, said in `warnings`. */
    private readonly standbyWarnings: () => string[] = () => [],
    /** --database-mode, for the migrations it applies. */
    private readonly databaseMode: DatabaseMode = 'auto',
  ) {}

  /** The last replication risk seen, so a change is logged once, not on every probe. */
  private risk: string | null = null;

  /**
   * Check the primary's replication now (at start, and on every ready probe): a risk is
   * logged as a warning when it appears and at info when it is gone (a standby that came
   * back). Returns the risk; null also when the check could not run (readiness says why).
   */
  async checkReplication(): Promise<string | null> {
    if (!this.replicationRisk) return null;
    let risk: string | null;
    try {
      risk = await this.replicationRisk();
    } catch {
      return this.risk;
    }
    if (risk !== this.risk) {
      if (risk) this.log.warn(risk);
      else this.log.info('the primary has a synchronous standby again: acknowledged writes survive a failover');
      this.risk = risk;
    }
    return risk;
  }

  /** From now on /readyz answers 503: the gateway is stopping (SIGTERM/SIGINT). */
  startDraining(): void {
    this.draining = true;
  }

  get isDraining(): boolean {
    return this.draining;
  }

  async check(): Promise<Answer> {
    if (this.draining) {
      return { ready: false, message: 'The gateway is shutting down; send requests to another replica.' };
    }
    const other = this.otherProblem();
    if (other !== null) return { ready: false, message: other };
    if (!this.pending) {
      this.pending = this.checkDatabase().finally(() => {
        this.pending = null;
      });
    }
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<Answer>((resolve) => {
      timer = setTimeout(
        () =>
          resolve({
            ready: false,
            message: `The database did not answer within ${CHECK_TIMEOUT_MS / 1000}s; the gateway keeps retrying.`,
          }),
        CHECK_TIMEOUT_MS,
      );
    });
    try {
      return await Promise.race([this.pending, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  private async checkDatabase(): Promise<Answer> {
    // Not ready until a re-apply has finished with its follow-up (class reconcile): the
    // schema alone, with an empty class table, would answer NOT_FOUND to every record.
    if (this.applying) {
      return { ready: false, message: `The database schema (version ${SCHEMA_VERSION}) is being applied; retry shortly.` };
    }
    try {
      const v = await schemaVersion(this.pool);
      if (v !== null && v >= SCHEMA_VERSION) {
        // Still ready: the gateway serves, but the operator is told what a failover would cost.
        const risk = await this.checkReplication();
        const warnings = [...(risk ? [risk] : []), ...this.standbyWarnings()];
        return warnings.length > 0 ? { ready: true, warnings } : { ready: true };
      }
      this.ensureSchema();
      return {
        ready: false,
        message: `The database schema (version ${SCHEMA_VERSION}) is missing and is being applied; retry shortly.`,
      };
    } catch (e) {
      // A connection to a standby is refused with what to do (db/kysely/primary.ts); say that.
      if ((e as { code?: unknown }).code === READ_ONLY) return { ready: false, message: `The gateway ${(e as Error).message}.` };
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
      this.applying = migrate(this.migrationPool, { mode: this.databaseMode })
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
