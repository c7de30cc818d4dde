/**
 * Validates an object against the committed SharedContext CRD's openAPIV3Schema with ajv,
 * as the API server would accept it. The chart's tests (the example SharedContext) use it.
 *
 * A structural schema refuses unknown keys by pruning them (and by kubectl's Strict
 * server-side field validation), which JSON Schema cannot express; for validation every
 * object node that declares `properties` gets `additionalProperties: false`, so an
 * undeclared field is an error here as it is on `kubectl apply`. apiVersion and kind are
 * checked as the API server's routing does (group kslate.dev, version v1, kind SharedContext).
 */
import { readFileSync } from 'node:fs';
import { Ajv, type ErrorObject } from 'ajv';
import { parse } from 'yaml';
import { CRD_PATH, type SchemaNode } from '../../chart/schema/generate.js';

/** The committed CRD's openAPIV3Schema of version v1. */
export function crdOpenApiSchema(): SchemaNode {
  const crd = parse(readFileSync(new URL(`../../${CRD_PATH}`, import.meta.url), 'utf8'));
  const version = crd.spec.versions.find((v: { name: string }) => v.name === 'v1');
  return version.schema.openAPIV3Schema as SchemaNode;
}

/** The structural schema with pruning made explicit: `additionalProperties: false` wherever properties are declared. */
export function closed(node: SchemaNode): SchemaNode {
  const out: SchemaNode = { ...node };
  if (node.properties) {
    out.properties = Object.fromEntries(Object.entries(node.properties as Record<string, SchemaNode>).map(([k, s]) => [k, closed(s)]));
    if (!node['x-kubernetes-preserve-unknown-fields']) out.additionalProperties = false;
  }
  if (typeof node.additionalProperties === 'object') out.additionalProperties = closed(node.additionalProperties as SchemaNode);
  if (node.items) out.items = closed(node.items as SchemaNode);
  return out;
}

let compiled: ReturnType<Ajv['compile']> | undefined;

function validator() {
  if (!compiled) {
    const ajv = new Ajv({ allErrors: true, strict: true });
    ajv.addVocabulary(['x-kubernetes-preserve-unknown-fields', 'x-kubernetes-list-type', 'x-kubernetes-list-map-keys', 'x-kubernetes-int-or-string']);
    // Kubernetes' formats; the API server checks them, the shape is what matters here.
    ajv.addFormat('date-time', /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$/i);
    ajv.addFormat('int64', { type: 'number', validate: (n: number) => Number.isSafeInteger(n) });
    compiled = ajv.compile(closed(crdOpenApiSchema()));
  }
  return compiled;
}

function describeError(e: ErrorObject): string {
  const where = e.instancePath.replace(/^\//, '').replace(/\//g, '.') || '(root)';
  if (e.keyword === 'additionalProperties') return `${where}: unknown field "${(e.params as { additionalProperty: string }).additionalProperty}"`;
  return `${where}: ${e.message}`;
}

/** Whether the API server would accept `obj` as a SharedContext; on failure, one line per problem. */
export function validateAgainstCrd(obj: unknown): { ok: true } | { ok: false; errors: string[] } {
  const errors: string[] = [];
  const o = obj as { apiVersion?: unknown; kind?: unknown } | null;
  if (o?.apiVersion !== 'kslate.dev/v1') errors.push(`apiVersion: must be kslate.dev/v1, got ${JSON.stringify(o?.apiVersion)}`);
  if (o?.kind !== 'SharedContext') errors.push(`kind: must be SharedContext, got ${JSON.stringify(o?.kind)}`);
  const validate = validator();
  if (!validate(obj)) errors.push(...(validate.errors ?? []).map(describeError));
  return errors.length === 0 ? { ok: true } : { ok: false, errors };
}
