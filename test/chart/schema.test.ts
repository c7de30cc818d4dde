/**
 * values.schema.json through a real helm (both pinned versions): a misspelt or mistyped
 * value fails `helm lint` and `helm template` naming the key. No templates are needed for
 * this (helm validates the merged values before rendering); postgres.allowDefaultPassword
 * is set so a template `fail` on the default password never hides the schema error.
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, test } from 'vitest';
import { HELMS, helmBinary } from '../../scripts/fetch-helm.mjs';

const chart = fileURLToPath(new URL('../../chart', import.meta.url));
const ALLOW = ['--set', 'postgres.allowDefaultPassword=true'];

function run(helm: string, args: string[]) {
  // No cluster: helm v4's client-side dry-run install must not reach for one.
  const r = spawnSync(helm, args, { encoding: 'utf8', env: { ...process.env, KUBECONFIG: '/nonexistent', HELM_CACHE_HOME: '/tmp/kslate-helm-cache', HELM_CONFIG_HOME: '/tmp/kslate-helm-config' } });
  return { code: r.status, out: `${r.stdout}${r.stderr}` };
}

const mistakes: [string, string[], RegExp][] = [
  ['a misspelt gateway.replcas', ['--set', 'gateway.replcas=3'], /replcas/],
  ['an unknown top-level foo', ['--set', 'foo=1'], /\bfoo\b/],
  ['a misspelt postgres.storage.sise', ['--set', 'postgres.storage.sise=2Gi'], /sise/],
  ['a string for gateway.replicas', ['--set-string', 'gateway.replicas=two'], /gateway.replicas[\s\S]*(integer)/],
  ['a port out of range', ['--set', 'gateway.listenPort=70000'], /listenPort/],
  ['an unknown pull policy', ['--set', 'image.pullPolicy=Sometimes'], /pullPolicy/],
];

for (const version of Object.keys(HELMS)) {
  describe(`helm ${version}`, () => {
    // helmBinary fetches on first use and throws saying what to do when it cannot: never a skip.
    const helm = () => helmBinary(version);

    test('the default values pass lint and template', () => {
      for (const cmd of [['lint', chart], ['template', 'kslate', chart]]) {
        const r = run(helm(), [...cmd, ...ALLOW]);
        expect(r.code, r.out).toBe(0);
      }
    }, 240_000);

    test.each(mistakes)('%s fails helm lint and helm template, naming the key', (_name, set, names) => {
      for (const cmd of [['lint', chart], ['template', 'kslate', chart]]) {
        const r = run(helm(), [...cmd, ...ALLOW, ...set]);
        expect(r.code, r.out).not.toBe(0);
        // lint: "[ERROR] values.yaml: ..."; template: "values don't meet the specifications of the schema(s)".
        expect(r.out).toMatch(/values\.yaml: |schema\(s\)/);
        expect(r.out).toMatch(names);
      }
    }, 240_000);

    // helm v3 needs a reachable cluster even for `install --dry-run=client`; v4 does not.
    if (!version.startsWith('v3.')) {
      test('helm install (client dry run) refuses a misspelt key and accepts the defaults', () => {
        const bad = run(helm(), ['install', 'kslate', chart, '--dry-run=client', ...ALLOW, '--set', 'gateway.replcas=3']);
        expect(bad.code, bad.out).not.toBe(0);
        expect(bad.out).toMatch(/INSTALLATION FAILED[\s\S]*replcas/);
        const good = run(helm(), ['install', 'kslate', chart, '--dry-run=client', ...ALLOW]);
        expect(good.code, good.out).toBe(0);
      }, 240_000);
    }
  });
}
