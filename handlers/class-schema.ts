/**
 * The SharedContext manifest (decisions §1): shape, defaults and the semantic rules a
 * class must satisfy before the reconciler may store it. Pure: valibot and types only.
 */
import * as v from 'valibot';
import { STRENGTHS } from './strength.js';
import type { ClassManifest, ClassSpec, Durability, FieldDef, FieldKind, FieldType } from './types.js';

const CLASS_NAME = /^[a-z][a-z0-9-]{0,62}$/;
const FIELD_NAME = /^[a-zA-Z_][a-zA-Z0-9_-]{0,62}$/;
// Kubernetes names: a namespace is a DNS label, a service account a DNS subdomain.
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
const DNS_SUBDOMAIN = /^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

const KINDS = ['versioned', 'soft', 'append', 'task'] as const satisfies readonly FieldKind[];
const DURABILITIES = ['strict', 'relaxed'] as const satisfies readonly Durability[];
/** The kinds whose writes may be relaxed (issue 38); a versioned or task write is always strict. */
const RELAXABLE: readonly FieldKind[] = ['soft', 'append'];
export const DurabilitySchema = v.picklist(DURABILITIES, oneOfList(DURABILITIES));
const TYPES = ['string', 'integer', 'number', 'boolean', 'object', 'array', 'any'] as const satisfies readonly FieldType[];
const PROVIDERS = ['apikey', 'k8s-sa', 'oidc'];
const MAX_LEASE_SECONDS = 86_400;
/** Retention and per-record TTL bounds (issue 37): a duration of at least a second, at most ten years. */
const MIN_RETENTION_MS = 1000;
export const MAX_RETENTION_MS = 10 * 365 * 86_400_000;
/** keepLast: the newest rows kept per field, 1 to this. */
export const MAX_KEEP_LAST = 1_000_000;

const UNIT_MS: Record<string, number> = {
  ns: 1e-6, us: 1e-3, 'µs': 1e-3, 'μs': 1e-3, ms: 1, s: 1e3, m: 60e3, h: 3600e3,
};
const DURATION_TERM = /(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)/y;

/**
 * Parses a Go/Kubernetes duration (`90s`, `15m`, `1h30m`, `500ms`, `1.5h`; `0` alone is
 * allowed as in Go) into milliseconds. Returns null for anything else, including
 * negative durations.
 */
export function parseDuration(s: string): number | null {
  if (s === '0') return 0;
  if (s.startsWith('+')) s = s.slice(1);
  if (s === '') return null;
  let total = 0;
  DURATION_TERM.lastIndex = 0;
  while (DURATION_TERM.lastIndex < s.length) {
    const m = DURATION_TERM.exec(s);
    if (!m) return null;
    total += Number(m[1]) * UNIT_MS[m[2]];
  }
  // Round to whole nanoseconds, Go's resolution, so `1.1h` is exactly 3960000 ms.
  const ms = Math.round(total * 1e6) / 1e6;
  return Number.isFinite(ms) ? ms : null;
}

const DAYS_TERM = /^(\d+)d(.*)$/;

/**
 * A retention duration (issue 37): a Go duration (`parseDuration`) optionally led by whole
 * days (`30d`, `7d12h`), since retention is counted in days. Null for anything else.
 */
export function parseRetention(s: string): number | null {
  const m = DAYS_TERM.exec(s);
  if (!m) return parseDuration(s);
  const rest = m[2] === '' ? 0 : parseDuration(m[2]);
  return rest === null ? null : Number(m[1]) * 86_400_000 + rest;
}

const RETENTION_MESSAGE = 'must be a duration from 1s to 3650d such as 30d, 7d, 72h or 1h30m';
const Retention = v.pipe(
  v.string(RETENTION_MESSAGE),
  v.check((s) => {
    const ms = parseRetention(s);
    return ms !== null && ms >= MIN_RETENTION_MS && ms <= MAX_RETENTION_MS;
  }, RETENTION_MESSAGE),
);

function oneOfList(list: readonly string[]): string {
  return `must be one of ${list.join(', ')}`;
}

/**
 * Whether writes of this field may commit without waiting for the WAL flush (issue 38): its
 * own `durability`, else the class's for soft and append fields; versioned and task fields
 * are always strict (the schema rejects `relaxed` on them).
 */
export function fieldRelaxed(spec: Pick<ClassSpec, 'durability'>, def: Pick<FieldDef, 'kind' | 'durability'>): boolean {
  if (!RELAXABLE.includes(def.kind)) return false;
  return (def.durability ?? spec.durability ?? 'strict') === 'relaxed';
}

/** Whether a JSON value satisfies a field `type` (also used for `enum` values). */
export function matchesType(value: unknown, type: FieldType): boolean {
  switch (type) {
    case 'string': return typeof value === 'string';
    case 'integer': return Number.isInteger(value);
    case 'number': return typeof value === 'number' && Number.isFinite(value);
    case 'boolean': return typeof value === 'boolean';
    case 'object': return isPlainObject(value);
    case 'array': return Array.isArray(value);
    case 'any': return true;
  }
}

function isPlainObject(x: unknown): x is Record<string, unknown> {
  return typeof x === 'object' && x !== null && !Array.isArray(x);
}

function isJsonValue(x: unknown): boolean {
  if (x === null || typeof x === 'string' || typeof x === 'boolean') return true;
  if (typeof x === 'number') return Number.isFinite(x);
  if (Array.isArray(x)) return x.every(isJsonValue);
  if (isPlainObject(x) && Object.getPrototypeOf(x) === Object.prototype) return Object.values(x).every(isJsonValue);
  return false;
}

function regexError(source: string): string | null {
  try {
    new RegExp(source);
    return null;
  } catch (e) {
    return e instanceof Error ? e.message : String(e);
  }
}

/** Why a role subject is malformed, or null when it is fine. */
function subjectProblem(subject: string): string | null {
  const colon = subject.indexOf(':');
  const provider = colon < 0 ? '' : subject.slice(0, colon);
  const name = subject.slice(colon + 1);
  if (!PROVIDERS.includes(provider)) {
    return `"${subject}" must have the form <provider>:<name> with provider ${PROVIDERS.join(', ')}`;
  }
  if (provider === 'k8s-sa') {
    const [ns, sa, ...rest] = name.split('/');
    const ok = rest.length === 0 && sa !== undefined && DNS_LABEL.test(ns) && (sa === '*' || DNS_SUBDOMAIN.test(sa));
    return ok ? null : `"${subject}" must be k8s-sa:<namespace>/<serviceaccount> or k8s-sa:<namespace>/*`;
  }
  if (name === '') return `"${subject}" has no name after "${provider}:"`;
  if (/\s/.test(name)) return `"${subject}" must not contain whitespace`;
  // Only k8s-sa has a wildcard; `apikey:*` would silently match nobody (or a key named "*").
  if (name.includes('*')) return `"${subject}": wildcards exist only as k8s-sa:<namespace>/*`;
  return null;
}

/** A synthetic issue path below the value a rawCheck runs on. */
function pathTo(...keys: (string | number)[]): [v.IssuePathItem, ...v.IssuePathItem[]] {
  const items = keys.map((key): v.UnknownPathItem => ({ type: 'unknown', origin: 'value', input: undefined, key, value: undefined }));
  return items as [v.IssuePathItem, ...v.IssuePathItem[]];
}

// ---- schema pieces ----

const oneOf = oneOfList;

/**
 * A mapping with exactly these keys: unknown keys are reported, so a typo such as
 * `requireEvidnce` cannot silently fall back to a default.
 */
function mapping<const E extends v.ObjectEntries>(entries: E) {
  const known = Object.keys(entries).join(', ');
  return plain(v.strictObject(entries, (issue) => (issue.expected === 'never' ? `unknown key (allowed: ${known})` : 'is required')));
}

/** valibot's object schemas accept arrays (their indexes become keys); a manifest's mappings must not. */
function plain<S extends v.BaseSchema<any, unknown, v.BaseIssue<unknown>>>(schema: S, message = 'must be a mapping') {
  return v.pipe(v.custom<Record<string, unknown>>(isPlainObject, message), schema);
}

const Bool = v.boolean('must be true or false');
export const StrengthSchema = v.picklist(STRENGTHS, oneOf(STRENGTHS));
const NonEmptyString = v.pipe(v.string('must be a non-empty string'), v.minLength(1, 'must be a non-empty string'));
const StringList = (what: string) => v.array(NonEmptyString, `must be a list of ${what}s`);

/** A whole number from 1 to `max`; every refusal says so in `message`. */
const wholeFrom1 = (max: number, message: string) =>
  v.pipe(v.number(message), v.integer(message), v.minValue(1, message), v.maxValue(max, message));

const LEASE_MESSAGE = `must be a whole number of seconds from 1 to ${MAX_LEASE_SECONDS}`;

export const FieldSchema = v.pipe(
  mapping({
    kind: v.picklist(KINDS, oneOf(KINDS)),
    type: v.optional(v.picklist(TYPES, oneOf(TYPES))),
    enum: v.optional(v.pipe(
      v.array(v.unknown(), 'must be a list of JSON values'),
      v.check((list) => list.every(isJsonValue), 'must be a list of JSON values'),
      v.minLength(1, 'must list at least one value'),
    )),
    requireEvidence: v.optional(Bool),
    minIdentityStrength: v.optional(StrengthSchema),
    leaseSeconds: v.optional(wholeFrom1(MAX_LEASE_SECONDS, LEASE_MESSAGE)),
    durability: v.optional(DurabilitySchema),
  }),
  v.rawCheck(({ dataset, addIssue }) => {
    if (!dataset.typed) return;
    const def: FieldDef = dataset.value;
    if (def.durability === 'relaxed' && !RELAXABLE.includes(def.kind)) {
      addIssue({
        message: def.kind === 'versioned'
          ? 'relaxed is not allowed on versioned fields: a versioned write is never relaxed (a crash could lose an applied compare-and-swap another writer already built on); use strict or make the field soft'
          : 'relaxed is not allowed on task fields: a claim is never relaxed (a crash could lose a granted lease and grant it twice); use strict',
        path: pathTo('durability'),
      });
    }
    if (def.kind === 'task') {
      const message = 'not allowed on task fields (a task holds a lease, not a value)';
      if (def.type !== undefined) addIssue({ message, path: pathTo('type') });
      if (def.enum !== undefined) addIssue({ message, path: pathTo('enum') });
      return;
    }
    if (def.leaseSeconds !== undefined) addIssue({ message: 'only allowed on task fields', path: pathTo('leaseSeconds') });
    const type = def.type;
    def.enum?.forEach((value, i) => {
      if (type !== undefined && !matchesType(value, type)) {
        addIssue({ message: `${JSON.stringify(value)} is not of the field's type ${type}`, path: pathTo('enum', i) });
      }
    });
  }),
);

const Subject = v.pipe(
  v.string('must be a string such as apikey:alice'),
  v.check((s) => subjectProblem(s) === null, (issue) => subjectProblem(issue.input as string) ?? 'is not a valid subject'),
);

export const RoleSchema = mapping({
  subjects: v.array(Subject, 'must be a list of subjects such as apikey:alice or k8s-sa:team-a/responder'),
  read: v.optional(StringList('field name'), () => []),
  write: v.optional(StringList('field name'), () => []),
});

const KEEP_LAST_MESSAGE = `must be a whole number from 1 to ${MAX_KEEP_LAST}`;

/** `spec.history` (issue 37): which history rows the sweep purges; each key optional. */
export const HistorySchema = v.pipe(
  mapping({
    maxAge: v.optional(Retention),
    keepLast: v.optional(wholeFrom1(MAX_KEEP_LAST, KEEP_LAST_MESSAGE)),
    rejectedMaxAge: v.optional(Retention),
  }),
  v.rawCheck(({ dataset, addIssue }) => {
    if (!dataset.typed) return;
    const { maxAge, rejectedMaxAge } = dataset.value;
    if (maxAge === undefined || rejectedMaxAge === undefined) return;
    if (parseRetention(rejectedMaxAge)! > parseRetention(maxAge)!) {
      addIssue({
        message: `must not be longer than maxAge (${maxAge}): every row older than maxAge is purged, rejected ones included`,
        path: pathTo('rejectedMaxAge'),
      });
    }
  }),
);

export const CheckpointSchema = mapping({
  sections: v.optional(StringList('section name')),
  requiredForResolve: v.optional(StringList('role name')),
});

const nameKey = (what: string) => v.pipe(
  v.string(),
  v.regex(FIELD_NAME, `is not a valid ${what} name (must match ${FIELD_NAME.source})`),
);

const SpecSchema = v.pipe(
  mapping({
    idPattern: v.optional(v.pipe(
      v.string('must be a regular expression string'),
      v.check((s) => regexError(s) === null, (issue) => `is not a valid regular expression: ${regexError(issue.input as string)}`),
    )),
    minIdentityStrength: v.optional(StrengthSchema),
    requireEvidence: v.optional(Bool),
    ttl: v.optional(v.nullable(v.pipe(
      v.string('must be a duration string such as 720h'),
      v.check((s) => (parseDuration(s) ?? 0) > 0, 'must be a positive duration such as 90s, 15m, 72h or 1h30m'),
    )), null),
    maxTtl: v.optional(Retention),
    history: v.optional(HistorySchema),
    durability: v.optional(DurabilitySchema),
    fields: v.pipe(
      plain(v.record(nameKey('field'), FieldSchema), 'must be a mapping of field names to field definitions'),
      v.check((fields) => Object.keys(fields).length > 0, 'must define at least one field'),
    ),
    roles: v.optional(plain(v.record(nameKey('role'), RoleSchema), 'must be a mapping of role names to roles'), () => ({})),
    checkpoint: v.optional(CheckpointSchema),
  }),
  // References between sections. Runs even when other parts of the spec are malformed,
  // so every problem is reported in one pass; hence the defensive reads.
  v.rawCheck(({ dataset, addIssue }) => {
    const spec = dataset.value;
    if (!isPlainObject(spec)) return;
    const fields = isPlainObject(spec.fields) ? new Set(Object.keys(spec.fields)) : null;
    const roles = isPlainObject(spec.roles) ? spec.roles : null;
    if (fields && roles) {
      for (const [role, def] of Object.entries(roles)) {
        if (!isPlainObject(def)) continue;
        for (const list of ['read', 'write'] as const) {
          const names = def[list];
          if (!Array.isArray(names)) continue;
          names.forEach((name, i) => {
            if (typeof name === 'string' && name !== '*' && !fields.has(name)) {
              addIssue({ message: `"${name}" is not a field of this class (use a field name or '*')`, path: pathTo('roles', role, list, i) });
            }
          });
        }
      }
    }
    const required = isPlainObject(spec.checkpoint) ? spec.checkpoint.requiredForResolve : undefined;
    if (!Array.isArray(required)) return;
    required.forEach((role, i) => {
      if (roles && typeof role === 'string' && !Object.hasOwn(roles, role)) {
        addIssue({ message: `"${role}" is not a role of this class`, path: pathTo('checkpoint', 'requiredForResolve', i) });
      }
    });
    // The rule guards setting status to `resolved`; without a status field it can never apply.
    if (required.length > 0 && fields && !fields.has('status')) {
      addIssue({ message: 'needs a field named status (the checkpoint is required before status becomes resolved)', path: pathTo('checkpoint', 'requiredForResolve') });
    }
  }),
);

/** Unlike spec, these mappings may carry keys kslate does not use (status, labels, uid, ...); they are dropped. */
const lenient = <E extends v.ObjectEntries>(entries: E) => plain(v.object(entries, 'is required'));

/** The SharedContext manifest schema. */
export const SharedContextSchema = lenient({
  apiVersion: v.literal('kslate.dev/v1', 'must be kslate.dev/v1'),
  kind: v.literal('SharedContext', 'must be SharedContext'),
  metadata: lenient({
    name: v.pipe(v.string('must be a string'), v.regex(CLASS_NAME, `must match ${CLASS_NAME.source}`)),
    namespace: v.optional(v.pipe(v.string('must be a string'), v.regex(DNS_LABEL, 'must be a Kubernetes namespace name')), 'default'),
  }),
  spec: SpecSchema,
});

/** `spec.fields.status.enum[1]`; keys that are not identifiers are quoted. */
function formatPath(issue: v.BaseIssue<unknown>): string {
  const keys = issue.path?.map((item) => item.key) ?? [];
  if (keys.length === 0) return 'manifest';
  return keys.map((key, i) => {
    if (typeof key === 'number') return `[${key}]`;
    const s = String(key);
    if (/^[A-Za-z_][\w-]*$/.test(s)) return i === 0 ? s : `.${s}`;
    return `[${JSON.stringify(s)}]`;
  }).join('');
}

/**
 * Validates a parsed SharedContext document. On success the manifest has its defaults
 * filled in (namespace `default`, ttl null, roles {}, role read/write []); on failure each
 * problem is one sentence starting with the path it concerns.
 */
export function parseManifest(doc: unknown): { ok: true; manifest: ClassManifest } | { ok: false; problems: string[] } {
  const result = v.safeParse(SharedContextSchema, doc);
  if (!result.success) {
    return { ok: false, problems: result.issues.map((issue) => `${formatPath(issue)}: ${issue.message}`) };
  }
  return { ok: true, manifest: result.output };
}
