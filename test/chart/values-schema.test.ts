/**
 * chart/values.schema.json (generated from chart/schema/values.ts): chart/values.yaml
 * validates against it, every mapping is closed except the Kubernetes-owned maps, every
 * property is described, and typical mistakes are refused. test/chart/schema.test.ts runs
 * the same file through a real helm.
 */
import { readFileSync } from 'node:fs';
import { Ajv } from 'ajv';
import * as v from 'valibot';
import { describe, expect, test } from 'vitest';
import { parse } from 'yaml';
import { ValuesSchema } from '../../chart/schema/values.js';
import type { SchemaNode } from '../../chart/schema/generate.js';

const root = new URL('../../chart/', import.meta.url);
const schema = JSON.parse(readFileSync(new URL('values.schema.json', root), 'utf8')) as SchemaNode;
const values = parse(readFileSync(new URL('values.yaml', root), 'utf8')) as Record<string, any>;
const validate = new Ajv({ allErrors: true, strict: true }).compile(schema);

/** Object nodes allowed to take keys the schema does not name: they are Kubernetes' own maps. */
const OPEN = [
  /^\.(gateway|worker|postgres)\.resources\.(requests|limits)$/,
  /^\.serviceMonitor\.labels$/,
  /^\.networkPolicy\.from\[\]$/,
];

function walk(node: SchemaNode, path: string, visit: (node: SchemaNode, path: string) => void) {
  visit(node, path);
  for (const [k, s] of Object.entries((node.properties ?? {}) as Record<string, SchemaNode>)) walk(s, `${path}.${k}`, visit);
  if (node.items) walk(node.items as SchemaNode, `${path}[]`, visit);
}

test('chart/values.yaml validates against values.schema.json and ValuesSchema', () => {
  expect(validate(values), JSON.stringify(validate.errors)).toBe(true);
  expect(v.safeParse(ValuesSchema, values).issues).toBeUndefined();
});

test('draft-07, closed at every level except Kubernetes maps, every property described', () => {
  expect(schema.$schema).toBe('http://json-schema.org/draft-07/schema#');
  const problems: string[] = [];
  walk(schema, '', (node, path) => {
    if (node.type === 'object' && node.additionalProperties !== false && !OPEN.some((re) => re.test(path))) problems.push(`${path || '(root)'}: not closed`);
    if (path !== '' && !path.endsWith('[]') && !node.description) problems.push(`${path}: no description`);
  });
  expect(problems).toEqual([]);
});

test('every key of values.yaml is in the schema and every schema property is in values.yaml', () => {
  const keys = (o: unknown, p = ''): string[] => (o && typeof o === 'object' && !Array.isArray(o)
    ? Object.entries(o).flatMap(([k, x]) => (OPEN.some((re) => re.test(`${p}.${k}`)) ? [`${p}.${k}`] : [`${p}.${k}`, ...keys(x, `${p}.${k}`)]))
    : []);
  const props: string[] = [];
  walk(schema, '', (node, path) => { if (path !== '' && !path.includes('[]')) props.push(path); });
  expect(keys(values).sort()).toEqual(props.sort());
});

describe('refused', () => {
  const cases: [string, (o: Record<string, any>) => void, string][] = [
    ['a misspelt key', (o) => { o.gateway.replcas = 3; }, '/gateway must NOT have additional properties'],
    ['an unknown top-level key', (o) => { o.foo = 1; }, ' must NOT have additional properties'],
    ['a nested misspelt key', (o) => { o.postgres.storage.sise = '2Gi'; }, '/postgres/storage must NOT have additional properties'],
    ['a wrong type', (o) => { o.gateway.replicas = 'two'; }, '/gateway/replicas must be integer'],
    ['zero replicas', (o) => { o.gateway.replicas = 0; }, '/gateway/replicas must be >= 1'],
    ['a port out of range', (o) => { o.gateway.listenPort = 70000; }, '/gateway/listenPort must be <= 65535'],
    ['listenPort 0', (o) => { o.gateway.listenPort = 0; }, '/gateway/listenPort must be >= 1'],
    ['a bad pull policy', (o) => { o.image.pullPolicy = 'Sometimes'; }, '/image/pullPolicy must be equal to one of the allowed values'],
    ['an unknown identity provider', (o) => { o.gateway.identity = 'k8s-sa,ldap'; }, '/gateway/identity must match pattern'],
    ['a duration without a unit', (o) => { o.worker.interval = '60'; }, '/worker/interval must match pattern'],
    ['a misspelt resources key', (o) => { o.worker.resources.limit = {}; }, '/worker/resources must NOT have additional properties'],
  ];
  test.each(cases)('%s', (_name, change, message) => {
    const o = structuredClone(values);
    change(o);
    expect(validate(o)).toBe(false);
    expect(validate.errors!.map((e) => `${e.instancePath} ${e.message}`)).toContainEqual(expect.stringContaining(message));
  });

  test('grpcPort 0 (off), a percentage minAvailable, NetworkPolicy peers and labels are fine', () => {
    const o = structuredClone(values);
    o.gateway.grpcPort = 0;
    o.gateway.podDisruptionBudget.minAvailable = '50%';
    o.gateway.identity = 'k8s-sa, apikey';
    o.networkPolicy.from = [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } } }, { ipBlock: { cidr: '10.0.0.0/8' } }];
    o.serviceMonitor.labels = { release: 'prometheus' };
    o.serviceMonitor.interval = '30s';
    o.worker.interval = '1h30m';
    expect(validate(o), JSON.stringify(validate.errors)).toBe(true);
  });
});
