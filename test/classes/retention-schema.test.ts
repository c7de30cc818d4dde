/**
 * spec.history and spec.maxTtl (issue 37): retention durations take days, bounds are checked
 * and every problem is one sentence naming its path.
 */
import { expect, test } from 'vitest';
import { parseManifest, parseRetention } from '../../handlers/class-schema.js';

function doc(spec: Record<string, unknown>) {
  return {
    apiVersion: 'kslate.dev/v1',
    kind: 'SharedContext',
    metadata: { name: 'scratch', namespace: 'team-a' },
    spec: { fields: { title: { kind: 'versioned' } }, ...spec },
  };
}

function problems(spec: Record<string, unknown>): string[] {
  const r = parseManifest(doc(spec));
  return r.ok ? [] : r.problems;
}

test('retention durations accept days and Go durations', () => {
  expect(parseRetention('30d')).toBe(30 * 86_400_000);
  expect(parseRetention('7d12h')).toBe(7.5 * 86_400_000);
  expect(parseRetention('72h')).toBe(72 * 3_600_000);
  expect(parseRetention('1h30m')).toBe(5_400_000);
  expect(parseRetention('d')).toBeNull();
  expect(parseRetention('3x')).toBeNull();
});

test('a class with history and maxTtl is accepted and keeps them as written', () => {
  const r = parseManifest(doc({ maxTtl: '1d', history: { maxAge: '30d', keepLast: 1000, rejectedMaxAge: '7d' } }));
  expect(r.ok).toBe(true);
  if (r.ok) {
    expect(r.manifest.spec.history).toEqual({ maxAge: '30d', keepLast: 1000, rejectedMaxAge: '7d' });
    expect(r.manifest.spec.maxTtl).toBe('1d');
  }
  // Each key is optional.
  expect(problems({ history: {} })).toEqual([]);
  expect(problems({ history: { keepLast: 1 } })).toEqual([]);
});

test('bad retention is refused with a sentence per problem', () => {
  expect(problems({ history: { maxAge: '30 days' } })).toEqual([
    'spec.history.maxAge: must be a duration from 1s to 3650d such as 30d, 7d, 72h or 1h30m',
  ]);
  expect(problems({ history: { maxAge: '0' } })[0]).toMatch(/^spec.history.maxAge: must be a duration from 1s/);
  expect(problems({ history: { maxAge: '4000d' } })[0]).toMatch(/^spec.history.maxAge: must be a duration/);
  expect(problems({ history: { keepLast: 0 } })).toEqual(['spec.history.keepLast: must be a whole number from 1 to 1000000']);
  expect(problems({ history: { keepLast: 2.5 } })).toEqual(['spec.history.keepLast: must be a whole number from 1 to 1000000']);
  expect(problems({ history: { keepLast: '10' } })).toEqual(['spec.history.keepLast: must be a whole number from 1 to 1000000']);
  expect(problems({ history: { maxage: '1d' } })[0]).toMatch(/^spec.history.maxage: unknown key \(allowed: maxAge, keepLast, rejectedMaxAge\)/);
  expect(problems({ history: { maxAge: '1d', rejectedMaxAge: '7d' } })).toEqual([
    'spec.history.rejectedMaxAge: must not be longer than maxAge (1d): every row older than maxAge is purged, rejected ones included',
  ]);
  expect(problems({ history: [] })).toEqual(['spec.history: must be a mapping']);
  expect(problems({ maxTtl: 3600 })).toEqual(['spec.maxTtl: must be a duration from 1s to 3650d such as 30d, 7d, 72h or 1h30m']);
});
