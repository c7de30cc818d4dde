/**
 * The bytes every watch stream of a process together may hold for its client (issue 31
 * item 9): the changes a stream has read to catch up and not yet sent, and the change its
 * transport is writing. A stream takes its share before it reads a catch-up page or hands a
 * live change to its transport, and gives it back when the transport asks for the next one
 * (the socket drained). Beyond the limit, takers wait in arrival order; one item always fits
 * when nothing else is held, so a change larger than the whole budget still goes out.
 *
 * Runtime-neutral (no Node module), like the hub that uses it.
 */
export class ByteBudget {
  private held = 0;
  private readonly waiting: { bytes: number; owner: object; grant(ok: boolean): void }[] = [];

  constructor(readonly limit: number) {}

  /** Bytes held now. */
  get used(): number {
    return this.held;
  }

  /** Takers waiting for room. */
  get waiters(): number {
    return this.waiting.length;
  }

  /** Take `bytes` now when they fit and nobody waits before us; false otherwise (nothing taken). */
  tryTake(bytes: number): boolean {
    if (this.waiting.length > 0 || !this.fits(bytes)) return false;
    this.held += bytes;
    return true;
  }

  /**
   * Take `bytes`, waiting in line for room. Resolves true once they are held, false when
   * `cancel(owner)` withdrew the request first (nothing is held then).
   */
  take(bytes: number, owner: object): Promise<boolean> {
    if (this.tryTake(bytes)) return Promise.resolve(true);
    return new Promise((grant) => this.waiting.push({ bytes, owner, grant }));
  }

  /** Hold `bytes` more without waiting: what a read returned beyond what was taken for it (one change at most). */
  add(bytes: number): void {
    this.held += bytes;
  }

  release(bytes: number): void {
    if (bytes <= 0) return;
    this.held = Math.max(0, this.held - bytes);
    this.pump();
  }

  /** Grant the requests at the head of the line that fit now. */
  private pump(): void {
    while (this.waiting.length > 0 && this.fits(this.waiting[0]!.bytes)) {
      const w = this.waiting.shift()!;
      this.held += w.bytes;
      w.grant(true);
    }
  }

  /** Withdraw `owner`'s waiting request, if any (it resolves false). */
  cancel(owner: object): void {
    const i = this.waiting.findIndex((w) => w.owner === owner);
    if (i < 0) return;
    const [w] = this.waiting.splice(i, 1);
    w!.grant(false);
    // The head may have changed: a smaller request behind the withdrawn one may fit now.
    this.pump();
  }

  private fits(bytes: number): boolean {
    return this.held === 0 || this.held + bytes <= this.limit;
  }
}
