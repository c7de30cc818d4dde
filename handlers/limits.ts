/** Counts from query strings and arguments: decimal integers in a range, or MALFORMED naming the key. */
import { SvcError } from './errors.js';

const DECIMAL = /^[0-9]{1,16}$/;

/**
 * `raw` as an integer from `min` to `max`. Text must be plain decimal digits (no sign,
 * exponent, hex, blanks or fraction: `0x10`, `1e2` and ` 5` are refused, not reinterpreted);
 * a number must be an integer.
 */
export function parseCount(
  name: string,
  raw: string | number,
  min: number,
  max: number,
  where: Record<string, unknown>,
): number {
  const n = typeof raw === 'number' ? raw : DECIMAL.test(raw) ? Number(raw) : NaN;
  if (!Number.isSafeInteger(n) || n < min || n > max) {
    throw new SvcError('MALFORMED', `${name} must be a decimal integer from ${min} to ${max}; got ${String(raw).slice(0, 40)}.`, where);
  }
  return n;
}
