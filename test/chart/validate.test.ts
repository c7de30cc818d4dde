/**
 * Every object rendered from every chart/ci values file (and a few more value combinations)
 * validated offline against the Kubernetes OpenAPI schemas (kubernetes-models) and the
 * Prometheus Operator CRD schema (@kubernetes-models/prometheus-operator), with every pinned helm.
 * SharedContext objects are validated against the chart's own CRD schema in the CRD tests;
 * they are the one kind skipped here.
 *
 * What this catches: wrong types, missing required fields, bad enums and formats. What it does
 * not: unknown (e.g. misspelt) fields, which kubernetes-models' precompiled validators accept;
 * the template tests assert the fields that matter by name.
 */
import { Namespace, Secret, Service, ServiceAccount } from 'kubernetes-models/v1';
import { Deployment, StatefulSet } from 'kubernetes-models/apps/v1';
import { NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1';
import { ClusterRole, ClusterRoleBinding, Role, RoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1';
import { ServiceMonitor } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1';
import { describe, expect, test } from 'vitest';
import { CI_VALUES, HELM_VERSIONS, render, type K8sObject, type SetValues } from './render.js';

interface Validatable {
  validate(): void;
}
type Model = new (data: any) => Validatable;

/** apiVersion/kind → the model class whose validate() checks the schema. */
const MODELS: Record<string, Model> = {
  'v1/Namespace': Namespace,
  'v1/Secret': Secret,
  'v1/Service': Service,
  'v1/ServiceAccount': ServiceAccount,
  'apps/v1/Deployment': Deployment,
  'apps/v1/StatefulSet': StatefulSet,
  'networking.k8s.io/v1/NetworkPolicy': NetworkPolicy,
  'policy/v1/PodDisruptionBudget': PodDisruptionBudget,
  'rbac.authorization.k8s.io/v1/ClusterRole': ClusterRole,
  'rbac.authorization.k8s.io/v1/ClusterRoleBinding': ClusterRoleBinding,
  'rbac.authorization.k8s.io/v1/Role': Role,
  'rbac.authorization.k8s.io/v1/RoleBinding': RoleBinding,
  'monitoring.coreos.com/v1/ServiceMonitor': ServiceMonitor,
};
/** Validated elsewhere (the CRD's own openAPIV3Schema), explicitly not here. */
const ELSEWHERE = new Set(['kslate.dev/v1/SharedContext']);

/** The object's schema problems ('' when valid). Unknown kinds are a failure, never a skip. */
function problems(o: K8sObject): string {
  const key = `${o.apiVersion}/${o.kind}`;
  const model = MODELS[key];
  if (!model) return `no schema model for ${key}: add it to MODELS in test/chart/validate.test.ts`;
  try {
    new model(o).validate();
    return '';
  } catch (e) {
    return (e as Error).message;
  }
}

/** Value combinations beyond the ci files, so that every template branch is validated. */
const EXTRA: Record<string, [string[], SetValues]> = {
  'grpc, oidc and apikey, watchNamespace': [
    ['default'],
    {
      'gateway.grpcPort': 9000,
      'gateway.identity': 'oidc,apikey',
      'gateway.apikeysSecret': 'keys',
      'gateway.oidc.issuer': 'https://login.example.com',
      'gateway.oidc.audience': 'kslate',
      'gateway.oidc.jwksUrl': 'https://login.example.com/jwks',
      watchNamespace: 'agents',
    },
  ],
  'every option at once': [
    ['network-policy'],
    {
      'serviceMonitor.enabled': true,
      'example.enabled': true,
      'tls.enabled': true,
      'tls.secretName': 'tls',
      'image.pullSecrets': ['regcred'],
      'postgres.storage.storageClass': 'fast',
      'postgres.image': 'docker.io/library/postgres:16',
    },
  ],
};

describe.each(HELM_VERSIONS)('helm %s: rendered objects are valid Kubernetes objects', (v) => {
  const cases: [string, string[], SetValues][] = [
    ...Object.keys(CI_VALUES).map((name): [string, string[], SetValues] => [`ci/${name}-values.yaml`, [name], {}]),
    ...Object.entries(EXTRA).map(([name, [files, set]]): [string, string[], SetValues] => [name, files, set]),
  ];
  test.each(cases)('%s', (_name, files, set) => {
    const objs = render(v, files, set);
    expect(objs.length).toBeGreaterThan(0);
    const checked = objs.filter((o) => !ELSEWHERE.has(`${o.apiVersion}/${o.kind}`));
    const failures = checked.map((o) => [`${o.kind}/${o.metadata?.name}`, problems(o)]).filter(([, p]) => p !== '');
    expect(failures).toEqual([]);
  });
});

test('the validation is real: a wrong type, a missing required field and a bad enum are caught', () => {
  const objs = render(HELM_VERSIONS[0], ['service-monitor']);
  const deployment = structuredClone(objs.find((o) => o.kind === 'Deployment')!);
  deployment.spec.template.spec.containers[0].ports[0].containerPort = '8080';
  expect(problems(deployment)).toMatch(/containerPort must be integer/);
  const noSelector = structuredClone(objs.find((o) => o.kind === 'Deployment')!);
  delete noSelector.spec.selector;
  expect(problems(noSelector)).toMatch(/selector/);
  const sm = structuredClone(objs.find((o) => o.kind === 'ServiceMonitor')!);
  sm.spec.endpoints[0].scheme = 'gopher';
  expect(problems(sm)).toMatch(/scheme/);
  expect(problems({ apiVersion: 'example.com/v1', kind: 'Widget', metadata: { name: 'w' } })).toMatch(/no schema model for example\.com\/v1\/Widget/);
});
