/**
 * Renders the chart with a real helm (scripts/fetch-helm.mjs): `helm template rel chart -n kslate`
 * with values files and --set-json values, parsed into objects. A helm that cannot be fetched
 * throws (helmBinary says what to do), so the tests fail rather than skip.
 */
import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';
import { HELMS, helmBinary } from '../../scripts/fetch-helm.mjs';

export const CHART = fileURLToPath(new URL('../../chart', import.meta.url));
export const NAMESPACE = 'kslate';
export const RELEASE = 'rel';
/** Every pinned helm version (v4.1.4, v3.17.2): each test runs against each. */
export const HELM_VERSIONS = Object.keys(HELMS);
/** chart/ci/*-values.yaml, by name (`default`, `tls`, ...) → absolute path. */
export const CI_VALUES: Record<string, string> = Object.fromEntries(
  readdirSync(join(CHART, 'ci'))
    .filter((f) => f.endsWith('-values.yaml'))
    .sort()
    .map((f) => [f.slice(0, -'-values.yaml'.length), join(CHART, 'ci', f)]),
);

/** A rendered Kubernetes object; only what the tests read is typed. */
export interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  [key: string]: any;
}

export type SetValues = Record<string, unknown>;

/** Runs helm with `args`; returns status, stdout and stderr. */
export function helm(version: string, args: string[]): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(helmBinary(version), args, { encoding: 'utf8' });
  if (r.error) throw r.error;
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

function templateArgs(valuesFiles: string[], set: SetValues): string[] {
  const args = ['template', RELEASE, CHART, '-n', NAMESPACE];
  for (const f of valuesFiles) args.push('-f', CI_VALUES[f] ?? f);
  // --set-json keeps types exact (0 stays an int, "k8s-sa,apikey" stays one string).
  for (const [k, v] of Object.entries(set)) args.push('--set-json', `${k}=${JSON.stringify(v)}`);
  return args;
}

const cache = new Map<string, K8sObject[]>();

/**
 * The objects `helm template` renders. `valuesFiles` are ci names (`tls`) or paths. Throws with
 * helm's stderr when rendering fails. Results are cached per arguments: rendering is ~100 ms.
 */
export function render(version: string, valuesFiles: string[] = ['default'], set: SetValues = {}): K8sObject[] {
  const args = templateArgs(valuesFiles, set);
  const key = version + '\0' + args.join('\0');
  const hit = cache.get(key);
  if (hit) return hit;
  const r = helm(version, args);
  if (r.status !== 0) throw new Error(`helm ${version} template failed (${r.status}):\n${r.stderr}`);
  const objects = parseAllDocuments(r.stdout).flatMap((doc) => {
    if (doc.errors.length > 0) throw new Error(`helm ${version} rendered invalid YAML: ${doc.errors[0].message}`);
    const o = doc.toJS() as K8sObject | null;
    return o === null ? [] : [o];
  });
  cache.set(key, objects);
  return objects;
}

/** helm's stderr for a render that must fail; throws when it renders. */
export function renderError(version: string, valuesFiles: string[] = ['default'], set: SetValues = {}): string {
  const r = helm(version, templateArgs(valuesFiles, set));
  if (r.status === 0) throw new Error(`helm ${version} template succeeded but was expected to fail`);
  return r.stderr;
}

/** The one object of `kind` named `name` (exactly one, else throws listing what there is). */
export function find(objects: K8sObject[], kind: string, name: string): K8sObject {
  const hits = objects.filter((o) => o.kind === kind && o.metadata.name === name);
  if (hits.length !== 1) {
    throw new Error(`expected one ${kind} ${name}, found ${hits.length}; rendered: ${objects.map((o) => `${o.kind}/${o.metadata.name}`).join(', ')}`);
  }
  return hits[0];
}

/** Every object of `kind`. */
export const ofKind = (objects: K8sObject[], kind: string): K8sObject[] => objects.filter((o) => o.kind === kind);
