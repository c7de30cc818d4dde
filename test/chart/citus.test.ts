/**
 * An external Citus coordinator (issue 35, docs/scale-out.md): `external.databaseMode` passes
 * --database-mode to the gateway and the worker; the default (auto) renders nothing new, and
 * the schema refuses anything but auto, plain and citus.
 */
import { describe, expect, test } from 'vitest';
import { HELM_VERSIONS, render, renderError, type K8sObject } from './render.js';

const GATEWAY = 'rel-kslate-gateway';
const WORKER = 'rel-kslate-worker';

const modeEnv = (objs: K8sObject[], name: string) => {
  const d = objs.find((o) => o.kind === 'Deployment' && o.metadata.name === name)!;
  return d.spec.template.spec.containers[0].env.find((e: { name: string }) => e.name === 'KSLATE_DATABASE_MODE');
};

describe.each(HELM_VERSIONS)('helm %s', (v) => {
  test('external.databaseMode=citus: the gateway and the worker run with KSLATE_DATABASE_MODE=citus', () => {
    const objs = render(v, ['external-dsn'], { 'external.databaseMode': 'citus' });
    for (const d of [GATEWAY, WORKER]) expect(modeEnv(objs, d)).toEqual({ name: 'KSLATE_DATABASE_MODE', value: 'citus' });
  });
  test('the default (auto) leaves the mode to the extension: no variable', () => {
    const objs = render(v, ['external-dsn']);
    for (const d of [GATEWAY, WORKER]) expect(modeEnv(objs, d)).toBeUndefined();
  });
  test('any other mode is refused by the values schema', () => {
    expect(renderError(v, ['external-dsn'], { 'external.databaseMode': 'sharded' })).toMatch(/databaseMode/);
  });
});
