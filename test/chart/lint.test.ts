/** `helm lint --strict` passes for every chart/ci/*-values.yaml with every pinned helm. */
import { describe, expect, test } from 'vitest';
import { CHART, CI_VALUES, HELM_VERSIONS, helm } from './render.js';

test('the ci values files are the ones the chart promises', () => {
  expect(Object.keys(CI_VALUES).sort()).toEqual(
    ['apikey', 'default', 'example', 'external-dsn', 'network-policy', 'one-replica', 'service-monitor', 'tls'].sort(),
  );
});

describe.each(HELM_VERSIONS)('helm %s lint --strict', (version) => {
  test.each(Object.keys(CI_VALUES))('ci/%s-values.yaml', (name) => {
    const r = helm(version, ['lint', '--strict', CHART, '-f', CI_VALUES[name]]);
    expect(r.status, `helm ${version} lint --strict -f ci/${name}-values.yaml:\n${r.stdout}\n${r.stderr}`).toBe(0);
    expect(r.stdout).toMatch(/1 chart\(s\) linted, 0 chart\(s\) failed/);
  }, 240_000);
});
