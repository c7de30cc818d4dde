/**
 * Identity strengths and their ranking (decisions §2): the one list the type, the class
 * schema's picklist and the ranking all come from. Pure: no runtime imports.
 */

/** Every strength, strongest first: the index is the rank. */
export const STRENGTHS = Object.freeze(['pod-bound', 'sa-bound', 'issuer-declared', 'shared-secret'] as const);

export type Strength = (typeof STRENGTHS)[number];

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
