/**
 * The rejected-credential budget (decisions §2, interface "Limits"): a token bucket per
 * client address, spent by every 401, and up front by every check that costs a call to an
 * identity provider (a TokenReview; refunded when the credential is accepted). While an
 * address's bucket is empty its requests get 429 RATE_LIMITED before any credential is checked.
 */

/** Options for {@link RejectedCredentialBudget}; the defaults are the spec's values. */
export interface RejectedCredentialBudgetOptions {
  /** Tokens refilled per second (default 50). */
  ratePerSecond?: number;
  /** Bucket capacity (default 200). */
  burst?: number;
  /** Monotonic clock in milliseconds (default `performance.now`). */
  now?: () => number;
  /** Most addresses tracked at once (default 100000); the least recently spent is evicted. */
  maxAddresses?: number;
}

interface Bucket {
  tokens: number;
  at: number;
}

/** Entries examined for lazy cleanup on each spend: keeps the work O(1) per call. */
const SWEEP_PER_SPEND = 2;

/** Per-address token buckets for rejected credentials. */
export class RejectedCredentialBudget {
  private readonly rate: number;
  private readonly burst: number;
  private readonly now: () => number;
  private readonly maxAddresses: number;
  /** Map order is least recently spent first: `spend` re-inserts its address. */
  private readonly buckets = new Map<string, Bucket>();

  constructor(opts: RejectedCredentialBudgetOptions = {}) {
    this.rate = opts.ratePerSecond ?? 50;
    this.burst = opts.burst ?? 200;
    this.now = opts.now ?? (() => performance.now());
    this.maxAddresses = opts.maxAddresses ?? 100_000;
    if (!(this.rate > 0) || !Number.isFinite(this.rate)) {
      throw new RangeError(`ratePerSecond must be a positive number, got ${this.rate}`);
    }
    if (!(this.burst >= 1) || !Number.isFinite(this.burst)) {
      throw new RangeError(`burst must be at least 1, got ${this.burst}`);
    }
    if (!Number.isInteger(this.maxAddresses) || this.maxAddresses < 1) {
      throw new RangeError(`maxAddresses must be a positive integer, got ${this.maxAddresses}`);
    }
  }

  /** Number of addresses currently tracked (an untracked address has a full bucket). */
  get size(): number {
    return this.buckets.size;
  }

  /** True while `addr` has no token left: answer 429 without checking the credential. */
  isExhausted(addr: string): boolean {
    const bucket = this.buckets.get(addr);
    if (bucket === undefined) return false;
    const t = this.now();
    const tokens = this.refill(bucket, t);
    if (tokens >= this.burst) {
      this.buckets.delete(addr);
      return false;
    }
    return tokens < 1;
  }

  /** Records one rejected credential (a 401) from `addr`. */
  spend(addr: string): void {
    const t = this.now();
    const existing = this.buckets.get(addr);
    const tokens = existing === undefined ? this.burst : this.refill(existing, t);
    // Concurrent requests may all fail after the bucket emptied; never go below zero, so
    // recovery time stays bounded by burst / rate.
    const bucket: Bucket = { tokens: Math.max(0, tokens - 1), at: t };
    if (existing !== undefined) this.buckets.delete(addr);
    this.sweep(t);
    if (existing === undefined) {
      while (this.buckets.size >= this.maxAddresses) {
        const oldest = this.buckets.keys().next().value as string;
        this.buckets.delete(oldest);
      }
    }
    this.buckets.set(addr, bucket);
  }

  /**
   * Gives back one token spent up front for a credential that was then accepted (a review
   * charged before it ran); never above the burst. An address no longer tracked is full already.
   */
  refund(addr: string): void {
    const bucket = this.buckets.get(addr);
    if (bucket === undefined) return;
    const t = this.now();
    const tokens = this.refill(bucket, t) + 1;
    if (tokens >= this.burst) this.buckets.delete(addr);
    else this.buckets.set(addr, { tokens, at: t });
  }

  private refill(bucket: Bucket, t: number): number {
    const elapsed = Math.max(0, t - bucket.at);
    return Math.min(this.burst, bucket.tokens + (elapsed * this.rate) / 1000);
  }

  /** Drops the least recently spent buckets once they have refilled: a full bucket is the default. */
  private sweep(t: number): void {
    let n = 0;
    for (const [addr, bucket] of this.buckets) {
      if (n++ >= SWEEP_PER_SPEND) break;
      if (this.refill(bucket, t) >= this.burst) this.buckets.delete(addr);
      else break;
    }
  }
}
