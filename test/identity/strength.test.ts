import { describe, expect, it } from 'vitest';
import { STRENGTHS, isStrength, strengthAtLeast } from '../../handlers/strength.js';
import type { Strength } from '../../handlers/types.js';

describe('strength ranking', () => {
  it('lists the four strengths strongest first', () => {
    expect(STRENGTHS).toEqual(['pod-bound', 'sa-bound', 'issuer-declared', 'shared-secret']);
  });

  it('accepts equal or stronger, refuses weaker, for every pair', () => {
    for (const [pi, presented] of STRENGTHS.entries()) {
      for (const [ri, required] of STRENGTHS.entries()) {
        expect(strengthAtLeast(presented, required), `${presented} >= ${required}`).toBe(pi <= ri);
      }
    }
  });

  it('spells out the ranking of decisions §2', () => {
    expect(strengthAtLeast('pod-bound', 'sa-bound')).toBe(true);
    expect(strengthAtLeast('sa-bound', 'issuer-declared')).toBe(true);
    expect(strengthAtLeast('issuer-declared', 'shared-secret')).toBe(true);
    expect(strengthAtLeast('shared-secret', 'issuer-declared')).toBe(false);
    expect(strengthAtLeast('issuer-declared', 'sa-bound')).toBe(false);
    expect(strengthAtLeast('sa-bound', 'pod-bound')).toBe(false);
  });

  it('never lets an unknown value pass a floor', () => {
    expect(strengthAtLeast('root' as Strength, 'shared-secret')).toBe(false);
    expect(strengthAtLeast('pod-bound', 'root' as Strength)).toBe(false);
  });

  it('recognises exactly the four names', () => {
    for (const s of STRENGTHS) expect(isStrength(s)).toBe(true);
    for (const s of ['', 'POD-BOUND', 'pod_bound', 'strong', null, undefined, 3, {}, ['pod-bound']]) {
      expect(isStrength(s), String(s)).toBe(false);
    }
  });

  it('cannot be reordered at run time', () => {
    expect(Object.isFrozen(STRENGTHS)).toBe(true);
  });
});
