/**
 * The generated SharedContext CRD: structural (what the API server demands of a v1 CRD),
 * and it accepts exactly the manifests `kslate classes check` accepts, minus what only the
 * worker can check (said in the schema's descriptions).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, test } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { parseManifest } from '../../handlers/class-schema.js';
import { re2Compatible, type SchemaNode } from '../../chart/schema/generate.js';
import { crdOpenApiSchema, validateAgainstCrd } from './crd.js';

const examplesDir = new URL('../../examples/classes/', import.meta.url);
const examples = readdirSync(examplesDir).filter((f) => /\.ya?ml$/.test(f)).flatMap((file) =>
  parseAllDocuments(readFileSync(new URL(file, examplesDir), 'utf8')).map((doc, i) => ({ name: `${file}#${i}`, obj: doc.toJS() as Record<string, any> })));

const base = () => structuredClone(examples[0].obj);

/** Walks every schema node with its path. */
function walk(node: SchemaNode, path: string, visit: (node: SchemaNode, path: string) => void) {
  visit(node, path);
  for (const [k, s] of Object.entries((node.properties ?? {}) as Record<string, SchemaNode>)) walk(s, `${path}.${k}`, visit);
  if (typeof node.additionalProperties === 'object') walk(node.additionalProperties as SchemaNode, `${path}.*`, visit);
  if (node.items) walk(node.items as SchemaNode, `${path}[]`, visit);
}

describe('the openAPIV3Schema is structural', () => {
  const schema = crdOpenApiSchema();
  test('type on every node (or preserve-unknown-fields), no JSON Schema-only keywords', () => {
    const problems: string[] = [];
    walk(schema, '', (node, path) => {
      if (!node.type && !node['x-kubernetes-preserve-unknown-fields']) problems.push(`${path}: no type`);
      for (const k of ['$schema', '$ref', 'definitions', '$defs', 'const', 'anyOf', 'oneOf', 'allOf', 'propertyNames', 'default']) {
        if (k in node) problems.push(`${path}: ${k}`);
      }
      if (node.properties && node.additionalProperties !== undefined) problems.push(`${path}: properties with additionalProperties`);
      if (typeof node.pattern === 'string' && !re2Compatible(node.pattern)) problems.push(`${path}: pattern RE2 cannot run`);
    });
    expect(problems).toEqual([]);
  });
  test('fields and roles are maps of declared objects; enum members are free JSON', () => {
    const spec = (schema.properties as any).spec;
    expect(spec.properties.fields.additionalProperties.properties.kind.enum).toEqual(['versioned', 'soft', 'append', 'task']);
    expect(spec.properties.roles.additionalProperties.required).toEqual(['subjects']);
    expect(spec.properties.fields.additionalProperties.properties.enum.items).toMatchObject({ 'x-kubernetes-preserve-unknown-fields': true });
    expect(spec.properties.ttl).toMatchObject({ type: 'string', nullable: true });
  });
});

describe('examples/classes validate against the CRD and parse', () => {
  test.each(examples.map((e) => [e.name, e.obj]))('%s', (_name, obj) => {
    expect(validateAgainstCrd(obj)).toEqual({ ok: true });
    // Consistency: what the CRD admits from the examples, `kslate classes check` accepts too.
    expect(parseManifest(obj)).toMatchObject({ ok: true });
  });
});

describe('refused by the CRD (kubectl apply would refuse them too)', () => {
  const cases: [string, (o: Record<string, any>) => void, RegExp][] = [
    ['an unknown key in spec', (o) => { o.spec.requireEvidnce = true; }, /^spec: unknown field "requireEvidnce"$/],
    ['an unknown key in a field definition', (o) => { o.spec.fields.title.lease = 30; }, /^spec\.fields\.title: unknown field "lease"$/],
    ['an unknown key in a role', (o) => { o.spec.roles.reviewer.writes = []; }, /^spec\.roles\.reviewer: unknown field "writes"$/],
    ['a wrong field kind', (o) => { o.spec.fields.title.kind = 'counter'; }, /^spec\.fields\.title\.kind: must be equal to one of the allowed values$/],
    ['a wrong field type', (o) => { o.spec.fields.title.type = 'text'; }, /^spec\.fields\.title\.type: must be equal/],
    ['leaseSeconds out of range', (o) => { o.spec.fields.triage.leaseSeconds = 0; }, /^spec\.fields\.triage\.leaseSeconds: must be >= 1$/],
    ['no fields', (o) => { delete o.spec.fields; }, /^spec: must have required property 'fields'$/],
    ['a role without subjects', (o) => { delete o.spec.roles.reviewer.subjects; }, /^spec\.roles\.reviewer: must have required property 'subjects'$/],
    ['ttl not a string', (o) => { o.spec.ttl = 3600; }, /^spec\.ttl: must be string$/],
    ['a wrong apiVersion', (o) => { o.apiVersion = 'kslate.dev/v2'; }, /^apiVersion: must be kslate\.dev\/v1/],
    ['a wrong kind', (o) => { o.kind = 'SharedContexts'; }, /^kind: must be SharedContext/],
  ];
  test.each(cases)('%s', (_name, change, message) => {
    const obj = base();
    change(obj);
    const result = validateAgainstCrd(obj);
    expect(result.ok).toBe(false);
    expect(result.ok ? [] : result.errors).toContainEqual(expect.stringMatching(message));
    // The same manifest is refused by `kslate classes check`.
    expect(parseManifest(obj).ok).toBe(false);
  });

  test('what only the worker checks passes the CRD and is refused by parseManifest (Accepted=False)', () => {
    const obj = base();
    obj.spec.ttl = 'soon';
    obj.spec.roles.reviewer.read.push('nosuchfield');
    expect(validateAgainstCrd(obj)).toEqual({ ok: true });
    const parsed = parseManifest(obj);
    expect(parsed.ok ? [] : parsed.problems).toEqual([
      'spec.ttl: must be a positive duration such as 90s, 15m, 72h or 1h30m',
      'spec.roles.reviewer.read[5]: "nosuchfield" is not a field of this class (use a field name or \'*\')',
    ]);
  });

  test('a status written by the worker validates', () => {
    const obj = base();
    obj.status = { conditions: [{ type: 'Accepted', status: 'True', reason: 'Applied', message: 'ok', observedGeneration: 3, lastTransitionTime: '2026-11-24T01:00:00Z' }] };
    expect(validateAgainstCrd(obj)).toEqual({ ok: true });
    obj.status.conditions[0].status = 'Yes';
    expect(validateAgainstCrd(obj).ok).toBe(false);
  });
});
