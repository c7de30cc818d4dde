/**
 * The process-wide byte budget of the watch streams (runtime/watch-budget.ts, issue 31
 * item 9): takers beyond the limit wait in arrival order, one item always fits when nothing
 * else is held, and a withdrawn request neither holds bytes nor blocks those behind it.
 */
import { describe, expect, test } from 'vitest';
import { ByteBudget } from '../../runtime/watch-budget.js';

describe('ByteBudget', () => {
  test('takers beyond the limit wait, and are served in arrival order as bytes come back', async () => {
    const b = new ByteBudget(100);
    expect(b.tryTake(60)).toBe(true);
    const order: string[] = [];
    const first = b.take(50, {}).then((ok) => order.push(`first ${ok}`));
    // Fits on its own, but waits behind the first: no overtaking.
    expect(b.tryTake(10)).toBe(false);
    const second = b.take(10, {}).then((ok) => order.push(`second ${ok}`));
    expect(b.waiters).toBe(2);
    b.release(60);
    await Promise.all([first, second]);
    expect(order).toEqual(['first true', 'second true']);
    expect(b.used).toBe(60);
  });

  test('one item larger than the whole budget still goes when nothing else is held', async () => {
    const b = new ByteBudget(100);
    expect(b.tryTake(500)).toBe(true);
    const waiting = b.take(1, {});
    b.release(500);
    expect(await waiting).toBe(true);
    expect(b.used).toBe(1);
  });

  test('a withdrawn request resolves false, holds nothing, and lets the next one through', async () => {
    const b = new ByteBudget(100);
    b.tryTake(90);
    const owner = {};
    const big = b.take(50, owner);
    const small = b.take(10, {});
    b.cancel(owner);
    expect(await big).toBe(false);
    expect(await small).toBe(true);
    expect(b.used).toBe(100);
  });
});
