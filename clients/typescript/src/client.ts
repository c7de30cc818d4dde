/**
 * The hand-written layer over the generated types: `kslate({ url, token })` →
 * `records(class)` and `record(class, id)`, with the compare-and-set loop (`update`), leases
 * renewed in the background (`lease`), resumable watches and typed errors.
 */
import createClient, { type Client } from 'openapi-fetch';
import { HeldError, KslateError, StaleError } from './errors.js';
import type { components, paths } from './schema.js';
import { backoff, sleep, toError, Transport, type TransportOptions } from './transport.js';
import { watchChanges, type WatchChange, type WatchOptions } from './watch.js';

type S = components['schemas'];
export type RecordData = S['GetResponse'];
export type Field = S['Field'];
export type PutResult = S['PutResponse'];
export type AppendResult = S['AppendResponse'];
export type ClaimResult = S['ClaimResponse'];
export type CheckpointSaveResult = S['CheckpointSaveResponse'];
export type CheckpointLoadResult = S['CheckpointLoadResponse'];
export type QueryResult = S['QueryResponse'];
export type HistoryResult = S['HistoryResponse'];
export type HistoryRow = S['HistoryRow'];
export type Premise = { field: string; version: number; kind?: 'fence' };
export type Invocation = Record<string, unknown>;

export interface KslateOptions extends TransportOptions {}

export interface CallOptions {
  signal?: AbortSignal;
  /** Extra headers for this request (e.g. X-Svc-Scope). */
  headers?: Record<string, string>;
}

export interface WriteOptions extends CallOptions {
  evidence?: string;
  /** Premises; [] = rests on nothing (disables inference). */
  basedOn?: Premise[];
  invocation?: Invocation;
  /** Your own Idempotency-Key (default: a fresh one per call, kept across its retries). */
  idempotencyKey?: string;
  /** Run every check and answer what the write would answer now, writing nothing. */
  dryRun?: boolean;
}

export interface PutOptions extends WriteOptions {
  /** The version you read; 0 = the field must have no value. Required on versioned fields. */
  expectedVersion?: number;
}

export interface ClaimOptions extends CallOptions {
  leaseSeconds?: number;
  renew?: boolean;
  invocation?: Invocation;
  idempotencyKey?: string;
  dryRun?: boolean;
}

export interface GetOptions extends CallOptions {
  fields?: string[];
  entriesLimit?: number;
}

export interface HistoryOptions extends CallOptions {
  field?: string;
  limit?: number;
  before?: string;
}

export interface QueryOptions extends CallOptions {
  limit?: number;
  after?: string;
}

export interface UpdateOptions extends Omit<PutOptions, 'expectedVersion' | 'idempotencyKey'> {
  /** How many times to recompute after STALE (default 10); then the StaleError is thrown. */
  retries?: number;
  /** First backoff between attempts in ms (default 20), doubled each time with full jitter. */
  baseDelayMs?: number;
  /** Backoff cap in ms (default 1,000). */
  maxDelayMs?: number;
}

export interface LeaseOptions extends CallOptions {
  /** Lease length (default: the field's class-defined lease). */
  seconds?: number;
  /** Renew after this fraction of the lease has passed (default 1/3). */
  renewFraction?: number;
  invocation?: Invocation;
  /** Called after each successful renewal. */
  onRenew?: (result: ClaimResult) => void;
}

/** One write of a transaction (issue 33): the wire shape. */
export type TransactionWrite =
  | { op: 'put'; field: string; value: unknown; expected_version?: number; evidence?: string; based_on?: Premise[] }
  | { op: 'append'; field: string; entry: unknown; evidence?: string; based_on?: Premise[] }
  | { op: 'claim'; field: string; lease_seconds?: number; renew?: boolean };

export interface TransactionResult {
  record: string;
  record_version: number;
  [key: string]: unknown;
}

function writeHeaders(o: { headers?: Record<string, string>; idempotencyKey?: string }): Record<string, string> {
  const h: Record<string, string> = { ...(o.headers ?? {}) };
  if (o.idempotencyKey) h['Idempotency-Key'] = o.idempotencyKey;
  return h;
}

function writeBody(o: WriteOptions): Record<string, unknown> {
  const b: Record<string, unknown> = {};
  if (o.evidence !== undefined) b.evidence = o.evidence;
  if (o.basedOn !== undefined) b.based_on = o.basedOn;
  if (o.invocation !== undefined) b.invocation = o.invocation;
  return b;
}

const dryRunQuery = (o: { dryRun?: boolean }) => (o.dryRun ? { dry_run: 'true' } : undefined);

/** Unwraps an openapi-fetch answer: the data, or the typed error. */
function unwrap<T>(r: { data?: T; error?: unknown; response: Response }): T {
  if (r.error !== undefined || !r.response.ok) throw toError(r.response, r.error);
  return r.data as T;
}

export class KslateClient {
  readonly transport: Transport;
  /** The typed openapi-fetch client underneath (every route of docs/openapi.json). */
  readonly api: Client<paths>;

  constructor(opts: KslateOptions) {
    this.transport = new Transport(opts);
    this.api = createClient<paths>({
      baseUrl: this.transport.baseUrl,
      fetch: this.transport.send,
      // get's fields=a,b (comma-separated, as the API reads it).
      querySerializer: { array: { style: 'form', explode: false } },
    });
  }

  /** The records of a class. */
  records(className: string): Records {
    return new Records(this, className);
  }

  /** One record, `<class>/<id>`. */
  record(className: string, id: string): RecordHandle {
    return new RecordHandle(this, className, id);
  }

  /** The classes in which the caller has a role. */
  async classes(opts: CallOptions = {}): Promise<S['ClassesResponse']> {
    return unwrap(await this.api.GET('/v1/classes', { signal: opts.signal, headers: opts.headers }));
  }

  /** One class definition. */
  async class(name: string, opts: CallOptions = {}): Promise<S['ClassResponse']> {
    return unwrap(await this.api.GET('/v1/classes/{name}', { params: { path: { name } }, signal: opts.signal, headers: opts.headers }));
  }
}

/** `kslate({ url, token })` or `kslate({ url, getToken })`. */
export function kslate(opts: KslateOptions): KslateClient {
  return new KslateClient(opts);
}

export class Records {
  constructor(
    readonly client: KslateClient,
    readonly className: string,
  ) {}

  record(id: string): RecordHandle {
    return new RecordHandle(this.client, this.className, id);
  }

  get(id: string, opts: GetOptions = {}): Promise<RecordData> {
    return this.record(id).get(opts);
  }

  history(id: string, opts: HistoryOptions = {}): Promise<HistoryResult> {
    return this.record(id).history(opts);
  }

  /** One page of records whose fields equal `filters` (oldest first); `next_after` continues. */
  async query(filters: Record<string, string | number | boolean> = {}, opts: QueryOptions = {}): Promise<QueryResult> {
    const qs = new URLSearchParams();
    for (const [k, v] of Object.entries(filters)) qs.set(k, String(v));
    if (opts.limit !== undefined) qs.set('limit', String(opts.limit));
    if (opts.after !== undefined) qs.set('after', opts.after);
    return unwrap(
      await this.client.api.GET('/v1/records/{class}', {
        params: { path: { class: this.className } },
        querySerializer: () => qs.toString(),
        signal: opts.signal,
        headers: opts.headers,
      }),
    );
  }

  /** Every matching record, page after page. */
  async *scan(filters: Record<string, string | number | boolean> = {}, opts: QueryOptions = {}): AsyncGenerator<S['Record']> {
    let after = opts.after;
    do {
      const page = await this.query(filters, { ...opts, after });
      yield* page.records;
      after = page.next_after;
    } while (after);
  }

  /** Every applied change of every record of the class, from `from` (a change's id; default: now), resumed after drops. */
  watch(opts: WatchOptions & { from?: string } = {}): AsyncGenerator<WatchChange> {
    return watchChanges(this.client.transport, `/v1/classes/${encodeURIComponent(this.className)}/watch`, opts.from, opts);
  }
}

export class RecordHandle {
  constructor(
    readonly client: KslateClient,
    readonly className: string,
    readonly id: string,
  ) {}

  private get path() {
    return { class: this.className, id: this.id };
  }

  async get(opts: GetOptions = {}): Promise<RecordData> {
    return unwrap(
      await this.client.api.GET('/v1/records/{class}/{id}', {
        params: { path: this.path, query: { fields: opts.fields, entries_limit: opts.entriesLimit } },
        signal: opts.signal,
        headers: opts.headers,
      }),
    );
  }

  /** The record, or undefined when it does not exist (NOT_FOUND). */
  async find(opts: GetOptions = {}): Promise<RecordData | undefined> {
    try {
      return await this.get(opts);
    } catch (e) {
      if (e instanceof KslateError && e.code === 'NOT_FOUND') return undefined;
      throw e;
    }
  }

  async history(opts: HistoryOptions = {}): Promise<HistoryResult> {
    return unwrap(
      await this.client.api.GET('/v1/records/{class}/{id}/history', {
        params: { path: this.path, query: { field: opts.field, limit: opts.limit, before: opts.before } },
        signal: opts.signal,
        headers: opts.headers,
      }),
    );
  }

  async put(field: string, value: unknown, opts: PutOptions = {}): Promise<PutResult> {
    const body = { value, ...writeBody(opts) } as S['PutBody'];
    if (opts.expectedVersion !== undefined) body.expected_version = opts.expectedVersion;
    return unwrap(
      await this.client.api.PUT('/v1/records/{class}/{id}/fields/{field}', {
        params: { path: { ...this.path, field }, query: dryRunQuery(opts) as never },
        body,
        signal: opts.signal,
        headers: writeHeaders(opts),
      }),
    );
  }

  async append(field: string, entry: unknown, opts: WriteOptions = {}): Promise<AppendResult> {
    const body = { entry, ...writeBody(opts) } as S['AppendBody'];
    return unwrap(
      await this.client.api.POST('/v1/records/{class}/{id}/fields/{field}/entries', {
        params: { path: { ...this.path, field }, query: dryRunQuery(opts) as never },
        body,
        signal: opts.signal,
        headers: writeHeaders(opts),
      }),
    );
  }

  async claim(field: string, opts: ClaimOptions = {}): Promise<ClaimResult> {
    const body: Record<string, unknown> = {};
    if (opts.leaseSeconds !== undefined) body.lease_seconds = opts.leaseSeconds;
    if (opts.renew !== undefined) body.renew = opts.renew;
    if (opts.invocation !== undefined) body.invocation = opts.invocation;
    return unwrap(
      await this.client.api.PUT('/v1/records/{class}/{id}/fields/{field}/claim', {
        params: { path: { ...this.path, field }, query: dryRunQuery(opts) as never },
        body: body as S['ClaimBody'],
        signal: opts.signal,
        headers: writeHeaders(opts),
      }),
    );
  }

  /** Releases a lease you hold (a claim with lease_seconds 0). */
  release(field: string, opts: Omit<ClaimOptions, 'leaseSeconds' | 'renew'> = {}): Promise<ClaimResult> {
    return this.claim(field, { ...opts, leaseSeconds: 0 });
  }

  /** Saves your role's checkpoint (progress document) on the record. */
  async checkpoint(document: Record<string, unknown>, opts: Omit<WriteOptions, 'evidence' | 'basedOn' | 'invocation'> = {}): Promise<CheckpointSaveResult> {
    return unwrap(
      await this.client.api.PUT('/v1/records/{class}/{id}/checkpoint', {
        params: { path: this.path, query: dryRunQuery(opts) as never },
        body: { document } as S['CheckpointSaveBody'],
        signal: opts.signal,
        headers: writeHeaders(opts),
      }),
    );
  }

  /** Loads a role's checkpoint and the fields changed since it was saved. */
  async loadCheckpoint(opts: CallOptions & { role?: string } = {}): Promise<CheckpointLoadResult> {
    return unwrap(
      await this.client.api.GET('/v1/records/{class}/{id}/checkpoint', {
        params: { path: this.path, query: { role: opts.role } },
        signal: opts.signal,
        headers: opts.headers,
      }),
    );
  }

  /**
   * Several writes on this record, all or nothing, with one new record_version (issue 33,
   * `POST /v1/records/{class}/{id}/transactions`). A rejection throws the error that write
   * alone would get, its body carrying `index`.
   */
  transaction(writes: TransactionWrite[], opts: WriteOptions = {}): Promise<TransactionResult> {
    return this.client.transport.json<TransactionResult>(
      'POST',
      `/v1/records/${encodeURIComponent(this.className)}/${encodeURIComponent(this.id)}/transactions`,
      { body: { writes, ...writeBody(opts) }, query: dryRunQuery(opts), headers: writeHeaders(opts), signal: opts.signal },
    );
  }

  /**
   * Compare-and-set loop: reads the field, computes `fn(current)`, puts it with the version
   * read; on STALE computes again from the value the error carries (no extra read), at most
   * `retries` times, with backoff. `fn` gets undefined when the field has no value yet.
   */
  async update<T = unknown>(field: string, fn: (current: T | undefined, version: number) => T | Promise<T>, opts: UpdateOptions = {}): Promise<PutResult & { value: T }> {
    const retries = opts.retries ?? 10;
    const base = opts.baseDelayMs ?? 20;
    const max = opts.maxDelayMs ?? 1_000;
    const read = async (): Promise<{ value: T | undefined; version: number }> => {
      const rec = await this.find({ fields: [field], signal: opts.signal, headers: opts.headers });
      const f = rec?.fields[field] as { value?: unknown; version: number } | undefined;
      return { value: f?.value as T | undefined, version: f?.version ?? 0 };
    };
    let cur = await read();
    for (let attempt = 0; ; attempt++) {
      const next = await fn(cur.value, cur.version);
      try {
        const res = await this.put(field, next, { ...opts, expectedVersion: cur.version });
        return { ...res, value: next };
      } catch (e) {
        if (!(e instanceof StaleError) || attempt >= retries) throw e;
        // The STALE answer carries the current value; only a role that may write but not
        // read the field gets null there, and then the loop has to read (it cannot anyway).
        cur = e.readable ? { value: (e.currentValue ?? undefined) as T | undefined, version: e.currentVersion } : await read();
        await sleep(backoff(attempt, base, max), opts.signal);
      }
    }
  }

  /**
   * Claims the task field and keeps the lease: renews it in the background after
   * `renewFraction` of the lease; `signal` aborts when the lease is lost (a renewal refused,
   * or the lease ran out before a renewal got through), its reason the error. Dispose
   * (`await using`) or `release()` stops renewing and releases it.
   */
  async lease(field: string, opts: LeaseOptions = {}): Promise<Lease> {
    const first = await this.claim(field, { leaseSeconds: opts.seconds, invocation: opts.invocation, signal: opts.signal, headers: opts.headers });
    return new Lease(this, field, first, opts);
  }

  /** Every applied change of this record after `fromRecordVersion` (default: now), resumed after drops. */
  watch(opts: WatchOptions & { fromRecordVersion?: number } = {}): AsyncGenerator<WatchChange> {
    const path = `/v1/records/${encodeURIComponent(this.className)}/${encodeURIComponent(this.id)}/watch`;
    return watchChanges(this.client.transport, path, opts.fromRecordVersion === undefined ? undefined : String(opts.fromRecordVersion), opts);
  }
}

/** A held lease on a task field; see RecordHandle.lease. */
export class Lease implements AsyncDisposable {
  private readonly ac = new AbortController();
  private timer: ReturnType<typeof setTimeout> | undefined;
  private stopped = false;
  private renewing: Promise<void> | undefined;
  /** The last successful claim or renewal. */
  current: ClaimResult;
  renewals = 0;

  constructor(
    readonly handle: RecordHandle,
    readonly field: string,
    first: ClaimResult,
    private readonly opts: LeaseOptions,
  ) {
    this.current = first;
    opts.signal?.addEventListener('abort', () => void this.release().catch(() => undefined), { once: true });
    this.schedule();
  }

  /** Aborts when the lease is lost; `signal.reason` says why (a HeldError, or an Error on expiry). */
  get signal(): AbortSignal {
    return this.ac.signal;
  }
  get owner(): string | undefined {
    return this.current.owner;
  }
  get expiresAt(): Date | undefined {
    return this.current.lease_expires_at ? new Date(this.current.lease_expires_at) : undefined;
  }
  /** The field's version after the last claim or renewal (a fence for based_on). */
  get version(): number {
    return this.current.version;
  }

  private leaseMs(): number {
    const exp = this.expiresAt?.getTime();
    return this.opts.seconds !== undefined ? this.opts.seconds * 1000 : exp ? Math.max(0, exp - Date.now()) : 0;
  }

  private schedule(): void {
    if (this.stopped) return;
    const delay = Math.max(10, this.leaseMs() * (this.opts.renewFraction ?? 1 / 3));
    this.timer = setTimeout(() => {
      this.renewing = this.renew();
    }, delay);
  }

  private lose(reason: unknown): void {
    if (this.stopped) return;
    this.stopped = true;
    clearTimeout(this.timer);
    this.ac.abort(reason);
  }

  private async renew(): Promise<void> {
    for (let n = 0; !this.stopped; n++) {
      try {
        const r = await this.handle.claim(this.field, { leaseSeconds: this.opts.seconds, renew: true, invocation: this.opts.invocation, headers: this.opts.headers });
        if (this.stopped) return;
        // A renewal of a lease that lapsed and was claimed back is a new lease: the old one was lost.
        if (r.took_over_from !== undefined) return this.lose(new Error(`kslate: the lease on ${this.field} lapsed before it was renewed`));
        this.current = r;
        this.renewals++;
        this.opts.onRenew?.(r);
        return this.schedule();
      } catch (e) {
        if (this.stopped) return;
        if (e instanceof HeldError || (e instanceof KslateError && e.status > 0 && e.status < 500)) return this.lose(e);
        // Transient (no answer, 503 after the transport's retries): keep trying while the lease lasts.
        const exp = this.expiresAt?.getTime() ?? 0;
        if (Date.now() >= exp) return this.lose(new Error(`kslate: the lease on ${this.field} expired while it could not be renewed: ${(e as Error).message}`, { cause: e }));
        await sleep(Math.min(backoff(n, 100, 2_000), Math.max(10, exp - Date.now())));
      }
    }
  }

  /** Stops renewing and releases the lease (unless it was already lost). */
  async release(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    clearTimeout(this.timer);
    await this.renewing?.catch(() => undefined);
    await this.handle.release(this.field, { headers: this.opts.headers });
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.release();
  }
}
