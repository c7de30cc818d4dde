/**
 * The `k8s-sa` identity provider: Kubernetes service-account tokens, checked with a
 * TokenReview against the cluster's API server (decisions §2, docs/identity.md).
 *
 * The API server is protected: successful reviews are cached (bounded LRU, at most 30 s and
 * never past the token's `exp`), identical tokens share one review in flight, at most 16
 * reviews run at once and at most 64 wait their turn (more answer 503 at once), each review
 * charges the client address's rejected-credential budget before it is queued, and its 5 s
 * deadline runs from the request's arrival, queue included. Tokens of another provider's
 * issuer (`--identity k8s-sa,oidc`: the OIDC issuer) are never sent. An API server that
 * cannot answer is an outage (503 UNAVAILABLE), never a bad credential. Tokens are never
 * logged nor kept: the cache is keyed by their SHA-256, and logs name a token by its `jti`
 * claim when it has one.
 */
import { createHash } from 'node:crypto';
import {
  ApiException,
  AuthenticationV1Api,
  type KubeConfig,
  Observable,
  type ObservableMiddleware,
  type V1TokenReview,
} from '@kubernetes/client-node';
import type { Logger } from '../../handlers/context.js';
import { loadDefaultKubeConfig } from '../k8s/cluster.js';
import { SvcError } from '../../handlers/errors.js';
import type { AuthAttempt, Identity, IdentityProvider } from '../../handlers/types.js';

/** The outcome of one TokenReview as this provider needs it. */
export type ReviewFn = (token: string, audience: string, signal: AbortSignal) => Promise<V1TokenReview>;

export interface K8sSaOptions {
  /** The audience every accepted token must carry (--k8s-audience). */
  audience: string;
  log: Logger;
  /** Sends one TokenReview; the default uses the cluster found by `KubeConfig.loadFromDefault()`. */
  review?: ReviewFn;
  /** Where the cluster is, for log messages. */
  server?: string;
  cacheMax?: number;
  cacheTtlMs?: number;
  maxInFlight?: number;
  /** Reviews that may wait for one of the maxInFlight; beyond, a request answers 503 at once. */
  maxQueued?: number;
  /** A review not answered this long after its request arrived (queue included) is abandoned: 503. */
  timeoutMs?: number;
  /**
   * Issuers whose tokens are another provider's (`--identity k8s-sa,oidc`: the OIDC issuer):
   * such a token is passed on unreviewed.
   */
  foreignIssuers?: readonly string[];
  now?: () => number;
}

export const K8S_SA_DEFAULTS = {
  cacheMax: 10_000,
  cacheTtlMs: 30_000,
  maxInFlight: 16,
  maxQueued: 64,
  timeoutMs: 5_000,
} as const;

const JWT = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;
const SA_USER = /^system:serviceaccount:([^:]+):([^:]+)$/;
const POD_NAME = 'authentication.kubernetes.io/pod-name';
const POD_UID = 'authentication.kubernetes.io/pod-uid';

interface Claims {
  exp?: number;
  jti?: string;
  iss?: string;
}

/** The payload's `exp`, `jti` and `iss`, read without verifying anything; null when not a JWT. */
export function peekClaims(token: string): Claims | null {
  if (!JWT.test(token)) return null;
  let payload: unknown;
  try {
    payload = JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString('utf8'));
  } catch {
    return null;
  }
  if (typeof payload !== 'object' || payload === null || Array.isArray(payload)) return null;
  const p = payload as Record<string, unknown>;
  const claims: Claims = {};
  if (typeof p.exp === 'number' && Number.isFinite(p.exp)) claims.exp = p.exp;
  if (typeof p.jti === 'string' && p.jti.length <= 128) claims.jti = p.jti;
  if (typeof p.iss === 'string') claims.iss = p.iss;
  return claims;
}

/** The identity a TokenReview status grants for `audience`, or null when it grants none. */
export function identityFromReview(review: Pick<V1TokenReview, 'status'>, audience: string): Identity | null {
  const status = review.status;
  if (status?.authenticated !== true) return null;
  if (!Array.isArray(status.audiences) || !status.audiences.includes(audience)) return null;
  const m = SA_USER.exec(status.user?.username ?? '');
  if (m === null) return null;
  const name = `${m[1]}/${m[2]}`;
  const extra = status.user?.extra ?? {};
  const one = (k: string) => Array.isArray(extra[k]) && extra[k]!.length === 1 && extra[k]![0] !== '';
  const strength = one(POD_NAME) && one(POD_UID) ? 'pod-bound' : 'sa-bound';
  return { author: `k8s-sa:${name}`, provider: 'k8s-sa', name, strength };
}

/** A TokenReview through @kubernetes/client-node, aborted by `signal`. */
export function clientReview(kc: KubeConfig): ReviewFn {
  const api = kc.makeApiClient(AuthenticationV1Api);
  return (token, audience, signal) => {
    const withSignal: ObservableMiddleware = {
      pre: (ctx) => {
        ctx.setSignal(signal);
        return new Observable(Promise.resolve(ctx));
      },
      post: (res) => new Observable(Promise.resolve(res)),
    };
    return api.createTokenReview(
      {
        body: { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenReview', spec: { token, audiences: [audience] } },
      },
      { middleware: [withSignal], middlewareMergeStrategy: 'append' },
    );
  };
}

interface CacheEntry {
  identity: Identity;
  expiresAt: number;
}

export class K8sSaProvider implements IdentityProvider {
  readonly kind = 'k8s-sa';

  private readonly cache = new Map<string, CacheEntry>();
  private readonly pending = new Map<string, Promise<Identity | null>>();
  private readonly slots: ReviewSlots;
  private readonly review: ReviewFn;
  private readonly cacheMax: number;
  private readonly cacheTtlMs: number;
  private readonly timeoutMs: number;
  private readonly foreignIssuers: ReadonlySet<string>;
  private readonly now: () => number;

  constructor(private readonly opts: K8sSaOptions) {
    if (!opts.review) throw new Error('K8sSaProvider needs a review function; use K8sSaProvider.fromDefault');
    this.review = opts.review;
    this.cacheMax = opts.cacheMax ?? K8S_SA_DEFAULTS.cacheMax;
    this.cacheTtlMs = opts.cacheTtlMs ?? K8S_SA_DEFAULTS.cacheTtlMs;
    this.slots = new ReviewSlots(opts.maxInFlight ?? K8S_SA_DEFAULTS.maxInFlight, opts.maxQueued ?? K8S_SA_DEFAULTS.maxQueued);
    this.timeoutMs = opts.timeoutMs ?? K8S_SA_DEFAULTS.timeoutMs;
    this.foreignIssuers = new Set(opts.foreignIssuers ?? []);
    this.now = opts.now ?? Date.now;
  }

  /**
   * Finds the cluster as kubectl does (`KubeConfig.loadFromDefault()`): KUBECONFIG, else
   * ~/.kube/config, else the pod's own service account. Throws an Error naming the file when
   * the configuration cannot be read.
   */
  static fromDefault(audience: string, log: Logger, opts: Pick<K8sSaOptions, 'foreignIssuers'> = {}): K8sSaProvider {
    const kc = loadDefaultKubeConfig('k8s-sa');
    const server = kc.getCurrentCluster()?.server ?? '(none)';
    log.info(`k8s-sa: TokenReviews go to ${server}, audience "${audience}"`);
    return new K8sSaProvider({ ...opts, audience, log, review: clientReview(kc), server });
  }

  /** Reviews in flight right now (at most maxInFlight). */
  get inFlight(): number {
    return this.slots.running;
  }

  /** Reviews waiting for a slot right now (at most maxQueued). */
  get queued(): number {
    return this.slots.waiting;
  }

  /** Successful reviews currently cached. */
  get cached(): number {
    return this.cache.size;
  }

  async authenticate(token: string, attempt?: AuthAttempt): Promise<Identity | null> {
    const claims = peekClaims(token);
    if (claims === null) return null;
    // Another provider's issuer (e.g. the OIDC one): no cluster would accept it, so never ask.
    if (claims.iss !== undefined && this.foreignIssuers.has(claims.iss)) return null;
    const key = createHash('sha256').update(token, 'utf8').digest('hex');
    const hit = this.cache.get(key);
    if (hit !== undefined) {
      this.cache.delete(key);
      if (hit.expiresAt > this.now()) {
        this.cache.set(key, hit); // most recently used goes last
        return hit.identity;
      }
    }
    const shared = this.pending.get(key);
    if (shared !== undefined) return shared;
    // A review will be sent: charged to the client's address first (429 when it is spent).
    attempt?.charge();
    const p = this.reviewAndCache(token, key, claims).finally(() => this.pending.delete(key));
    this.pending.set(key, p);
    return p;
  }

  /** Forgets every cached review. */
  close(): void {
    this.cache.clear();
  }

  private async reviewAndCache(token: string, key: string, claims: Claims): Promise<Identity | null> {
    const jti = claims.jti !== undefined ? { jti: claims.jti } : {};
    const review = await this.send(token, claims);
    const identity = identityFromReview(review, this.opts.audience);
    if (identity === null) {
      this.opts.log.debug('k8s-sa: token not accepted by TokenReview', {
        ...jti,
        authenticated: review.status?.authenticated === true,
        audiences: review.status?.audiences ?? [],
      });
      return null;
    }
    const ttl = Math.min(this.cacheTtlMs, claims.exp !== undefined ? claims.exp * 1000 - this.now() : Infinity);
    if (ttl > 0) {
      this.cache.set(key, { identity, expiresAt: this.now() + ttl });
      while (this.cache.size > this.cacheMax) this.cache.delete(this.cache.keys().next().value!);
    }
    return identity;
  }

  /**
   * One review within the deadline, which starts now (the request's arrival): the wait for a
   * slot counts, so a long queue cannot hold a request past it; a full queue answers at once.
   */
  private async send(token: string, claims: Claims): Promise<V1TokenReview> {
    const deadline = this.now() + this.timeoutMs;
    const ac = new AbortController();
    const timer = setTimeout(() => ac.abort(new ReviewTimeout()), this.timeoutMs);
    try {
      try {
        await this.slots.acquire(ac.signal);
      } catch (e) {
        throw this.notSent(e);
      }
      // Handed a slot as its deadline passed (before its timer ran): not sent, the slot passes on.
      if (this.now() >= deadline) {
        this.slots.release();
        throw this.notSent(new ReviewTimeout());
      }
      try {
        const aborted = new Promise<never>((_, reject) => {
          if (ac.signal.aborted) reject(ac.signal.reason);
          ac.signal.addEventListener('abort', () => reject(ac.signal.reason), { once: true });
        });
        return await Promise.race([this.review(token, this.opts.audience, ac.signal), aborted]);
      } catch (e) {
        throw this.outage(e, claims);
      } finally {
        this.slots.release();
      }
    } finally {
      clearTimeout(timer);
    }
  }

  /** A review that never left the queue: no API server was asked, so nothing is logged here. */
  private notSent(e: unknown): SvcError {
    const why =
      e instanceof ReviewsQueueFull
        ? `${this.slots.maxWaiting} reviews are already waiting for it`
        : `no answer within ${this.timeoutMs} ms: the reviews before it took that long`;
    return new SvcError(
      'UNAVAILABLE',
      `Cannot check the service-account token: the Kubernetes API server (TokenReview) is busy (${why}); retry shortly.`,
    );
  }

  private outage(e: unknown, claims: Claims): SvcError {
    const server = this.opts.server ?? 'the Kubernetes API server';
    // `why` goes to the caller too, so it names no address; the log has the client's own error.
    let why: string;
    let detail: string;
    if (e instanceof ReviewTimeout) why = detail = `no answer within ${this.timeoutMs} ms`;
    else if (e instanceof ApiException) {
      const code = (e as ApiException<unknown>).code;
      why = detail =
        code === 401 || code === 403
          ? `HTTP ${code}: the gateway's service account may not create TokenReviews (bind it to system:auth-delegator)`
          : `HTTP ${code}`;
    } else {
      why = 'unreachable';
      detail = (e as Error)?.message ?? String(e);
    }
    this.opts.log.warn('k8s-sa: TokenReview failed', {
      ...(claims.jti !== undefined ? { jti: claims.jti } : {}),
      server,
      error: detail,
    });
    return new SvcError(
      'UNAVAILABLE',
      `Cannot check the service-account token: the Kubernetes API server (TokenReview) is unavailable (${why}); retry shortly.`,
    );
  }
}

class ReviewTimeout extends Error {}
class ReviewsQueueFull extends Error {}

/**
 * At most `max` reviews run at once; at most `maxWaiting` wait, in arrival order, each until
 * its signal aborts (its deadline); one more is refused at once (ReviewsQueueFull).
 */
class ReviewSlots {
  running = 0;
  /** Insertion-ordered: the first is the longest waiting. */
  private readonly queue = new Set<() => void>();

  constructor(
    private readonly max: number,
    readonly maxWaiting: number,
  ) {}

  get waiting(): number {
    return this.queue.size;
  }

  acquire(signal: AbortSignal): Promise<void> {
    if (this.running < this.max) {
      this.running++;
      return Promise.resolve();
    }
    if (this.queue.size >= this.maxWaiting) return Promise.reject(new ReviewsQueueFull());
    return new Promise<void>((resolve, reject) => {
      const onAbort = () => {
        this.queue.delete(granted);
        reject(signal.reason);
      };
      // The slot passes straight from release() to the waiter: `running` stays as it is.
      const granted = () => {
        signal.removeEventListener('abort', onAbort);
        resolve();
      };
      this.queue.add(granted);
      signal.addEventListener('abort', onAbort, { once: true });
    });
  }

  release(): void {
    const next = this.queue.values().next();
    if (next.done) this.running--;
    else {
      this.queue.delete(next.value);
      next.value();
    }
  }
}
