/**
 * The one place where requests leave the client: the credential, the retries, the
 * Idempotency-Key and the read-your-writes LSN. openapi-fetch calls `send` with a Request;
 * the watch streams call it too. fetch only: no Node built-in, so the same code runs on
 * Node, browsers, Deno and Workers.
 */
import { errorFromBody, type KslateError, NetworkError } from './errors.js';

export interface RetryOptions {
  /** Attempts in all, the first included (default 5). */
  attempts?: number;
  /** First backoff in ms, doubled each retry, with full jitter (default 100). */
  baseDelayMs?: number;
  /** Cap of one backoff, and of a Retry-After the client honours (default 10,000). */
  maxDelayMs?: number;
}

export interface TransportOptions {
  url: string;
  /** A fixed bearer token. */
  token?: string;
  /** Called for each request (and again after a 401 once): return a fresh token. */
  getToken?: () => string | Promise<string>;
  retry?: RetryOptions;
  /** Headers sent on every request (e.g. X-Svc-Scope). */
  headers?: Record<string, string>;
  /** The fetch to use (default globalThis.fetch). */
  fetch?: typeof fetch;
}

const WRITE_METHODS = new Set(['PUT', 'POST', 'PATCH', 'DELETE']);

/** Parses a PostgreSQL LSN ("16/B374D848") to a number comparable across answers. */
export function lsnValue(lsn: string): bigint | undefined {
  const m = /^([0-9A-Fa-f]{1,8})\/([0-9A-Fa-f]{1,8})$/.exec(lsn.trim());
  return m ? (BigInt(`0x${m[1]}`) << 32n) | BigInt(`0x${m[2]}`) : undefined;
}

/** A fresh Idempotency-Key: a random UUID (Web Crypto, present on every runtime the client supports). */
export function newIdempotencyKey(): string {
  return globalThis.crypto.randomUUID();
}

/** Resolves after `ms`, or rejects with the signal's reason when it aborts first. */
export function sleep(ms: number, signal?: AbortSignal | null): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal!.reason);
    };
    const t = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** Full-jitter exponential backoff for retry number `n` (0-based). */
export function backoff(n: number, base: number, max: number): number {
  return Math.random() * Math.min(max, base * 2 ** n);
}

function retryAfterMs(res: Response, max: number): number | undefined {
  const h = res.headers.get('retry-after');
  if (!h) return undefined;
  const secs = Number(h);
  if (Number.isFinite(secs)) return Math.min(max, Math.max(0, secs * 1000));
  const at = Date.parse(h);
  return Number.isFinite(at) ? Math.min(max, Math.max(0, at - Date.now())) : undefined;
}

export class Transport {
  readonly baseUrl: string;
  private readonly opts: TransportOptions;
  private readonly fetchFn: typeof fetch;
  /** The highest X-Kslate-Lsn any write answered with (read-your-writes on standbys). */
  private lsn: { text: string; value: bigint } | undefined;

  constructor(opts: TransportOptions) {
    if (!opts.url) throw new TypeError('kslate: url is required');
    if (!opts.token && !opts.getToken) throw new TypeError('kslate: token or getToken is required');
    this.opts = opts;
    this.baseUrl = opts.url.replace(/\/+$/, '');
    this.fetchFn = opts.fetch ?? ((input, init) => globalThis.fetch(input, init));
  }

  /** The LSN sent as X-Kslate-Min-Lsn on reads, if a write answered with one. */
  get lastLsn(): string | undefined {
    return this.lsn?.text;
  }

  private async token(): Promise<string> {
    return this.opts.getToken ? await this.opts.getToken() : this.opts.token!;
  }

  private noteLsn(res: Response): void {
    const text = res.headers.get('x-kslate-lsn');
    if (!text) return;
    const value = lsnValue(text);
    if (value !== undefined && (!this.lsn || value > this.lsn.value)) this.lsn = { text, value };
  }

  /**
   * Sends one logical request: a write gets an Idempotency-Key (kept across its retries), a
   * read the X-Kslate-Min-Lsn of the last write; 503, 409 IDEMPOTENCY_KEY_IN_USE and network
   * errors are retried with backoff, honouring Retry-After. Returns the last answer; throws
   * NetworkError when no answer came, or the signal's reason when it aborted.
   */
  readonly send = async (request: Request): Promise<Response> => {
    const method = request.method.toUpperCase();
    const write = WRITE_METHODS.has(method);
    const body = request.body ? await request.arrayBuffer() : undefined;
    const headers = new Headers(request.headers);
    for (const [k, v] of Object.entries(this.opts.headers ?? {})) if (!headers.has(k)) headers.set(k, v);
    if (write && !headers.has('idempotency-key')) headers.set('idempotency-key', newIdempotencyKey());
    if (!write && this.lsn && !headers.has('x-kslate-min-lsn')) headers.set('x-kslate-min-lsn', this.lsn.text);
    const attempts = Math.max(1, this.opts.retry?.attempts ?? 5);
    const base = this.opts.retry?.baseDelayMs ?? 100;
    const max = this.opts.retry?.maxDelayMs ?? 10_000;
    const signal = request.signal;
    let refreshed = false;
    for (let n = 0; ; n++) {
      headers.set('authorization', `Bearer ${await this.token()}`);
      let res: Response;
      try {
        res = await this.fetchFn(request.url, { method, headers, body, signal, redirect: 'follow' });
      } catch (e) {
        if (signal?.aborted) throw signal.reason;
        if (n + 1 >= attempts) {
          throw new NetworkError(0, { error: 'NETWORK', message: `kslate: ${method} ${request.url}: ${(e as Error)?.message ?? e}` }, undefined, { cause: e });
        }
        await sleep(backoff(n, base, max), signal);
        continue;
      }
      if (res.status === 401 && this.opts.getToken && !refreshed) {
        // A token that just expired: ask for a fresh one once.
        refreshed = true;
        await res.body?.cancel();
        n--;
        continue;
      }
      const retryable = res.status === 503 || (res.status === 409 && (await isKeyInUse(res)));
      if (!retryable || n + 1 >= attempts) {
        // Refusals that leave a history row (STALE, HELD, ...) carry one too: reading that row back is a read of your write.
        if (write) this.noteLsn(res);
        return res;
      }
      const wait = retryAfterMs(res, max) ?? backoff(n, base, max);
      await res.body?.cancel();
      await sleep(wait, signal);
    }
  };

  /** A JSON request outside openapi-fetch (routes the OpenAPI document does not have yet). */
  async json<T>(method: string, path: string, opts: { body?: unknown; query?: Record<string, string | undefined>; headers?: Record<string, string>; signal?: AbortSignal } = {}): Promise<T> {
    const url = new URL(this.baseUrl + path);
    for (const [k, v] of Object.entries(opts.query ?? {})) if (v !== undefined) url.searchParams.set(k, v);
    const headers = new Headers(opts.headers);
    if (opts.body !== undefined) headers.set('content-type', 'application/json');
    const res = await this.send(
      new Request(url, { method, headers, body: opts.body === undefined ? undefined : JSON.stringify(opts.body), signal: opts.signal }),
    );
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      /* keep the text */
    }
    if (!res.ok) throw toError(res, parsed);
    return parsed as T;
  }
}

/** A 409 whose body says IDEMPOTENCY_KEY_IN_USE (the first request with the key still runs). */
async function isKeyInUse(res: Response): Promise<boolean> {
  try {
    const body = (await res.clone().json()) as { error?: string };
    return body?.error === 'IDEMPOTENCY_KEY_IN_USE';
  } catch {
    return false;
  }
}

export function toError(res: Response, body: unknown): KslateError {
  return errorFromBody(res.status, body, res.headers.get('x-request-id') ?? undefined);
}
