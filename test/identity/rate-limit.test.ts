import { describe, expect, it } from 'vitest';
import { RejectedCredentialBudget } from '../../runtime/rate-limit.js';

function clock(start = 1_000) {
  let t = start;
  return {
    now: () => t,
    advance(ms: number) {
      t += ms;
    },
  };
}

describe('RejectedCredentialBudget', () => {
  it('allows a burst of 200 rejections, then is exhausted', () => {
    const c = clock();
    const b = new RejectedCredentialBudget({ now: c.now });
    for (let i = 0; i < 199; i++) {
      b.spend('10.0.0.1');
      expect(b.isExhausted('10.0.0.1'), `after ${i + 1}`).toBe(false);
    }
    b.spend('10.0.0.1');
    expect(b.isExhausted('10.0.0.1')).toBe(true);
  });

  it('refills at 50 per second', () => {
    const c = clock();
    const b = new RejectedCredentialBudget({ now: c.now });
    for (let i = 0; i < 200; i++) b.spend('a');
    expect(b.isExhausted('a')).toBe(true);
    c.advance(19);
    expect(b.isExhausted('a')).toBe(true);
    c.advance(1); // 20 ms at 50/s is one token
    expect(b.isExhausted('a')).toBe(false);
    b.spend('a');
    expect(b.isExhausted('a')).toBe(true);

    c.advance(1_000); // 50 tokens
    for (let i = 0; i < 50; i++) {
      expect(b.isExhausted('a')).toBe(false);
      b.spend('a');
    }
    expect(b.isExhausted('a')).toBe(true);
  });

  it('never refills past the burst', () => {
    const c = clock();
    const b = new RejectedCredentialBudget({ now: c.now, burst: 5, ratePerSecond: 1 });
    b.spend('a');
    c.advance(3_600_000);
    for (let i = 0; i < 5; i++) b.spend('a');
    expect(b.isExhausted('a')).toBe(true);
  });

  it('does not go into debt when spent while empty', () => {
    const c = clock();
    const b = new RejectedCredentialBudget({ now: c.now, burst: 2, ratePerSecond: 10 });
    for (let i = 0; i < 50; i++) b.spend('a');
    expect(b.isExhausted('a')).toBe(true);
    c.advance(100);
    expect(b.isExhausted('a')).toBe(false);
  });

  it('keeps addresses independent', () => {
    const c = clock();
    const b = new RejectedCredentialBudget({ now: c.now });
    for (let i = 0; i < 200; i++) b.spend('10.0.0.1');
    expect(b.isExhausted('10.0.0.1')).toBe(true);
    expect(b.isExhausted('10.0.0.2')).toBe(false);
    b.spend('10.0.0.2');
    expect(b.isExhausted('10.0.0.2')).toBe(false);
    expect(b.isExhausted('10.0.0.1')).toBe(true);
  });

  it('honours custom rate and burst', () => {
    const c = clock();
    const b = new RejectedCredentialBudget({ now: c.now, burst: 3, ratePerSecond: 2 });
    for (let i = 0; i < 3; i++) b.spend('a');
    expect(b.isExhausted('a')).toBe(true);
    c.advance(499);
    expect(b.isExhausted('a')).toBe(true);
    c.advance(1);
    expect(b.isExhausted('a')).toBe(false);
  });

  it('does not track an address that was only checked', () => {
    const b = new RejectedCredentialBudget({ now: clock().now });
    for (let i = 0; i < 100; i++) expect(b.isExhausted(`10.0.${i}.1`)).toBe(false);
    expect(b.size).toBe(0);
  });

  it('forgets a bucket once it has refilled', () => {
    const c = clock();
    const b = new RejectedCredentialBudget({ now: c.now });
    b.spend('a');
    expect(b.size).toBe(1);
    c.advance(20);
    expect(b.isExhausted('a')).toBe(false);
    expect(b.size).toBe(0);
  });

  it('drops refilled buckets lazily when others spend', () => {
    const c = clock();
    const b = new RejectedCredentialBudget({ now: c.now });
    b.spend('a');
    b.spend('b');
    c.advance(20);
    b.spend('c');
    expect(b.size).toBe(1);
  });

  it('bounds the number of addresses, evicting the least recently spent', () => {
    const c = clock();
    const b = new RejectedCredentialBudget({ now: c.now, burst: 1, maxAddresses: 3 });
    for (const addr of ['a', 'b', 'c']) b.spend(addr);
    b.spend('a'); // a is now the most recently spent
    b.spend('d');
    expect(b.size).toBe(3);
    expect(b.isExhausted('b')).toBe(false); // evicted
    for (const addr of ['a', 'c', 'd']) expect(b.isExhausted(addr), addr).toBe(true);
    for (let i = 0; i < 1000; i++) b.spend(`x${i}`);
    expect(b.size).toBe(3);
  });

  it('defaults to 100000 addresses', () => {
    const c = clock();
    const b = new RejectedCredentialBudget({ now: c.now });
    for (let i = 0; i < 100_001; i++) b.spend(`addr-${i}`);
    expect(b.size).toBe(100_000);
  });

  it('refund gives one token back (a charge for a credential that was accepted), never above the burst', () => {
    const c = clock();
    const b = new RejectedCredentialBudget({ now: c.now, burst: 3, ratePerSecond: 1 });
    for (let i = 0; i < 3; i++) b.spend('a');
    expect(b.isExhausted('a')).toBe(true);
    b.refund('a');
    expect(b.isExhausted('a')).toBe(false);
    b.spend('a');
    expect(b.isExhausted('a')).toBe(true);
    // Refunds up to a full bucket forget the address; refunding one never tracked does nothing.
    for (let i = 0; i < 5; i++) b.refund('a');
    expect(b.size).toBe(0);
    b.refund('never-seen');
    expect(b.size).toBe(0);
  });

  it('rejects nonsensical options', () => {
    expect(() => new RejectedCredentialBudget({ ratePerSecond: 0 })).toThrow(RangeError);
    expect(() => new RejectedCredentialBudget({ burst: 0 })).toThrow(RangeError);
    expect(() => new RejectedCredentialBudget({ maxAddresses: 0 })).toThrow(RangeError);
  });

  it('uses a real clock by default', async () => {
    const b = new RejectedCredentialBudget({ burst: 1, ratePerSecond: 100 });
    b.spend('a');
    expect(b.isExhausted('a')).toBe(true);
    await new Promise((r) => setTimeout(r, 30));
    expect(b.isExhausted('a')).toBe(false);
  });
});
