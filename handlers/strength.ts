/**
 * Identity strength ranking (decisions §2). Pure: no runtime imports.
 */
import type { Strength } from './types.js';

/** Every strength, strongest first: the index is the rank. */
export const STRENGTHS: readonly Strength[] = Object.freeze([
  'pod-bound',
  'sa-bound',
  'issuer-declared',
  'shared-secret',
] as const);

/** True when `presented` is as strong as `required` or stronger. */
export function strengthAtLeast(presented: Strength, required: Strength): boolean {
  const p = STRENGTHS.indexOf(presented);
  const r = STRENGTHS.indexOf(required);
  // An unknown value (only reachable by bypassing the types) must never pass a floor.
  if (p < 0 || r < 0) return false;
  return p <= r;
}

/** True when `s` is one of the four strength names. */
export function isStrength(s: unknown): s is Strength {
  return typeof s === 'string' && (STRENGTHS as readonly string[]).includes(s);
}
