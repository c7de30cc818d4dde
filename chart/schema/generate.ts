/**
 * Generates the chart's two schema files from the valibot schemas, so each has one source:
 * - chart/crds/sharedcontexts.kslate.dev.yaml from handlers/class-schema.ts (the schema
 *   `kslate classes check` and the worker use), converted to a Kubernetes structural schema;
 * - chart/values.schema.json from chart/schema/values.ts.
 * Pure: both functions return the file text; test/chart/generated.test.ts compares it with
 * the committed files and writes them under `npm run chart:generate`.
 */
import { toJsonSchema } from '@valibot/to-json-schema';
import { Document } from 'yaml';
import { SharedContextSchema } from '../../handlers/class-schema.js';
import { ValuesSchema } from './values.js';

/** A JSON Schema / OpenAPI v3 schema node, loosely typed: both are plain JSON. */
export type SchemaNode = { [key: string]: unknown };

export const CRD_PATH = 'chart/crds/sharedcontexts.kslate.dev.yaml';
export const VALUES_SCHEMA_PATH = 'chart/values.schema.json';

const WORKER = 'checked by the worker, which refuses the object with condition Accepted=False, reason Invalid';

/**
 * What the valibot schema checks but JSON Schema (or a CRD) cannot say, keyed by the path
 * of the node (`*` = a map's values, `[]` = a list's items). Each becomes the node's
 * description, so `kubectl explain` tells the rule the worker will apply.
 */
const NOTES: Record<string, string> = {
  '': 'A kslate class: the fields of one kind of shared record and who may read and write them (docs: decisions §1).',
  apiVersion: 'kslate.dev/v1.',
  kind: 'SharedContext.',
  metadata: 'metadata.name is the class name and must match ^[a-z][a-z0-9-]{0,62}$ (class names are one flat namespace). '
    + `A CRD cannot restrict metadata.name (the API server validates metadata as ObjectMeta), so the name rule is ${WORKER}.`,
  spec: 'The class definition. Unknown keys are refused: every object of this schema declares its properties, so the API server '
    + 'prunes undeclared fields and kubectl apply / create (server-side field validation, Strict by default since Kubernetes 1.27) '
    + 'refuses them. References between sections (role read/write lists name fields of this class, requiredForResolve names roles '
    + `and needs a field named status) are ${WORKER}.`,
  'spec.idPattern': `A JavaScript regular expression that record ids must match; absent = any id. Its syntax is ${WORKER}.`,
  'spec.minIdentityStrength': 'The weakest identity allowed to write: pod-bound > sa-bound > issuer-declared > shared-secret.',
  'spec.requireEvidence': 'true: every write must carry evidence.',
  'spec.ttl': 'Records are deleted this long after their last applied write: a positive Go/Kubernetes duration such as 90s, 15m, '
    + `72h or 1h30m (the duration is ${WORKER}). Absent or null: never.`,
  'spec.maxTtl': 'The longest ttl_seconds a put, append or transaction may give one record (docs/api.md "Record TTL"): a duration '
    + `from 1s to 3650d such as 30d, 72h or 1h30m (${WORKER}). Absent: up to 3650d.`,
  'spec.history': 'History retention (docs/worker.md "History retention"): the sweep purges rows older than maxAge, beyond the newest '
    + 'keepLast per field, and rejected attempts older than rejectedMaxAge. Never purged: the row holding a field\'s current value, '
    + 'the newest row per field, and the applied rows written after the oldest checkpoint saved on the record. Absent: every row is kept.',
  'spec.history.maxAge': `Rows older than this are purged: a duration from 1s to 3650d such as 30d or 72h (${WORKER}).`,
  'spec.history.keepLast': 'Only the newest keepLast rows of each field of a record are kept (1 to 1000000).',
  'spec.history.rejectedMaxAge': 'Rejected attempts (every outcome but applied) older than this are purged: a duration from 1s to 3650d, '
    + `not longer than maxAge (${WORKER}).`,
  'spec.durability': 'The default durability of the class\'s soft and append fields (docs/api.md "Durability"): strict (default) or '
    + 'relaxed — a write touching only relaxed fields commits without waiting for its WAL flush, so a database crash may lose the '
    + 'last few hundred ms of such writes. Versioned and task fields are always strict; a field\'s own durability wins.',
  'spec.fields': 'Field name → definition; at least one field. Names match ^[a-zA-Z_][a-zA-Z0-9_-]{0,62}$; '
    + `both rules are ${WORKER}.`,
  'spec.fields.*': 'A field definition. type and enum are not allowed on task fields, leaseSeconds only on task fields, and every '
    + `enum value must be of the field's type: ${WORKER}.`,
  'spec.fields.*.kind': 'versioned (compare-and-set put), soft (last write wins), append (a list of entries) or task (a lease).',
  'spec.fields.*.type': 'The JSON type of the value (of each entry for append fields); default any.',
  'spec.fields.*.enum': 'The allowed values (any JSON values).',
  'spec.fields.*.enum[]': 'Any JSON value.',
  'spec.fields.*.requireEvidence': 'true: every write of this field must carry evidence.',
  'spec.fields.*.minIdentityStrength': 'A floor for this field only (see spec.minIdentityStrength).',
  'spec.fields.*.leaseSeconds': 'Task fields only: the default lease of a claim, in seconds.',
  'spec.fields.*.durability': 'Soft and append fields: strict or relaxed (see spec.durability); default the class\'s. relaxed is '
    + `refused on versioned and task fields (${WORKER}).`,
  'spec.roles': `Role name → role. Names match ^[a-zA-Z_][a-zA-Z0-9_-]{0,62}$ (${WORKER}).`,
  'spec.roles.*': 'A role: who has it and which fields it may read and write.',
  'spec.roles.*.subjects': 'Who has the role: apikey:<name>, oidc:<sub>, k8s-sa:<namespace>/<serviceaccount> or k8s-sa:<namespace>/*. '
    + `The form is ${WORKER}.`,
  'spec.roles.*.read': "Field names the role may read; '*' = every field.",
  'spec.roles.*.write': "Field names the role may write; '*' = every field.",
  'spec.checkpoint': 'Checkpoints: progress documents a role saves on a record so that a replacement agent can pick up the work.',
  'spec.checkpoint.sections': 'Keys every checkpoint document must have.',
  'spec.checkpoint.requiredForResolve': 'Roles that must have saved a checkpoint before status may be set to resolved.',
};

/**
 * Whether Go's RE2 (the API server's `pattern` engine) accepts a JavaScript pattern with
 * the same meaning: no lookaround, backreferences or possessive/atomic groups.
 */
export function re2Compatible(pattern: string): boolean {
  return !/\(\?[=!]|\(\?<[=!]|\\[1-9]|\\k<|\(\?>|[*+?}]\+/.test(pattern);
}

function typeOf(value: unknown): string {
  if (Number.isInteger(value)) return 'integer';
  if (typeof value === 'number') return 'number';
  if (Array.isArray(value)) return 'array';
  if (value === null) throw new Error('null as a constant has no structural type');
  return typeof value;
}

function join(path: string, key: string): string {
  return path === '' ? key : key.startsWith('[') ? path + key : `${path}.${key}`;
}

/**
 * Converts @valibot/to-json-schema output into a Kubernetes structural schema: $ref
 * inlined, `type` on every node, `const` → one-member enum, `anyOf [X, null]` →
 * `nullable`, an empty schema (any JSON) → x-kubernetes-preserve-unknown-fields,
 * no `additionalProperties: false` (pruning plus strict field validation do that job),
 * no `default` or `propertyNames` (said in the description instead), patterns RE2 cannot
 * run moved to the description. Throws on anything it cannot express faithfully.
 */
export function toStructural(schema: SchemaNode, notes: Record<string, string> = {}): SchemaNode {
  const defs = { ...(schema.definitions as Record<string, SchemaNode> | undefined), ...(schema.$defs as Record<string, SchemaNode> | undefined) };
  const convert = (node: SchemaNode, path: string, seen: string[]): SchemaNode => {
    if (typeof node.$ref === 'string') {
      const name = node.$ref.replace(/^#\/(definitions|\$defs)\//, '');
      if (!defs[name]) throw new Error(`${path || 'root'}: unresolvable $ref ${node.$ref}`);
      if (seen.includes(name)) throw new Error(`${path || 'root'}: recursive $ref ${node.$ref} cannot be inlined`);
      const { $ref: _ref, ...rest } = node;
      return convert({ ...defs[name], ...rest }, path, [...seen, name]);
    }
    const extra: string[] = [];
    let src: SchemaNode = { ...node };
    if (Array.isArray(src.anyOf)) {
      const members = src.anyOf as SchemaNode[];
      const nonNull = members.filter((m) => m.type !== 'null');
      if (nonNull.length !== 1 || members.length !== 2) throw new Error(`${path}: anyOf other than [X, null] has no structural form`);
      const { anyOf: _anyOf, ...rest } = src;
      src = { ...nonNull[0], ...rest, nullable: true };
    }
    const out: SchemaNode = {};
    if ('const' in src) {
      out.type = typeOf(src.const);
      out.enum = [src.const];
    } else if (src.type !== undefined) {
      if (Array.isArray(src.type)) throw new Error(`${path}: a list of types has no structural form`);
      out.type = src.type;
    } else if (Array.isArray(src.enum)) {
      const types = new Set((src.enum as unknown[]).map(typeOf));
      if (types.size !== 1) throw new Error(`${path}: an enum of mixed types has no structural form`);
      out.type = [...types][0];
    }
    if (src.nullable) out.nullable = true;
    if (Array.isArray(src.enum)) out.enum = src.enum;
    for (const key of ['minLength', 'maxLength', 'minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum', 'minItems', 'maxItems', 'uniqueItems', 'minProperties', 'maxProperties', 'format']) {
      if (src[key] !== undefined) out[key] = src[key];
    }
    if (typeof src.pattern === 'string') {
      if (re2Compatible(src.pattern)) out.pattern = src.pattern;
      else extra.push(`Must match ${src.pattern} (${WORKER}).`);
    }
    if (src.default !== undefined) extra.push(`Default: ${JSON.stringify(src.default)}.`);
    if (out.type === 'object') {
      if (src.properties) {
        const props: Record<string, SchemaNode> = {};
        for (const [key, value] of Object.entries(src.properties as Record<string, SchemaNode>)) props[key] = convert(value, join(path, key), seen);
        out.properties = props;
        const required = src.required as string[] | undefined;
        if (required && required.length > 0) out.required = required;
        if (src.additionalProperties !== undefined && src.additionalProperties !== false) {
          throw new Error(`${path}: properties together with additionalProperties has no structural form`);
        }
      } else if (typeof src.additionalProperties === 'object' && src.additionalProperties !== null) {
        out.additionalProperties = convert(src.additionalProperties as SchemaNode, join(path, '*'), seen);
      } else {
        // An object of unknown shape: keep what is sent.
        out['x-kubernetes-preserve-unknown-fields'] = true;
      }
    } else if (out.type === 'array') {
      out.items = convert((src.items as SchemaNode | undefined) ?? {}, join(path, '[]'), seen);
    } else if (out.type === undefined) {
      // Any JSON value (an enum member, a `type: any` field value).
      out['x-kubernetes-preserve-unknown-fields'] = true;
    }
    const description = [notes[path] ?? src.description, ...extra].filter(Boolean).join(' ');
    return description ? { description, ...out } : out;
  };
  return convert(schema, '', []);
}

/** The SharedContext schema as JSON Schema (before the structural conversion). */
export function sharedContextJsonSchema(): SchemaNode {
  // errorMode 'ignore': custom/check/rawCheck actions (cross-field rules, durations,
  // subject forms) have no JSON Schema form; the NOTES above say where they are checked.
  return toJsonSchema(SharedContextSchema, { errorMode: 'ignore' }) as SchemaNode;
}

/** The CRD's openAPIV3Schema: the structural form of the SharedContext schema plus the status the worker writes. */
export function sharedContextOpenApiSchema(): SchemaNode {
  const structural = toStructural(sharedContextJsonSchema(), NOTES);
  const props = structural.properties as Record<string, SchemaNode>;
  // Kubernetes owns apiVersion, kind and metadata: the API server routes by group/version/kind
  // and validates metadata as ObjectMeta, so only their type is declared here.
  props.apiVersion = { description: NOTES.apiVersion, type: 'string' };
  props.kind = { description: NOTES.kind, type: 'string' };
  props.metadata = { description: NOTES.metadata, type: 'object' };
  // metadata is always set by the API server; a CRD may only require spec here.
  structural.required = ['spec'];
  props.status = STATUS_SCHEMA;
  return structural;
}

const STATUS_SCHEMA: SchemaNode = {
  description: 'Written by the worker through the status subresource (docs/worker-cluster.md).',
  type: 'object',
  properties: {
    conditions: {
      description: 'One condition, Accepted: True (reason Applied) or False (Invalid, Duplicate, KindChange) with a message.',
      type: 'array',
      'x-kubernetes-list-type': 'map',
      'x-kubernetes-list-map-keys': ['type'],
      items: {
        type: 'object',
        required: ['type', 'status'],
        properties: {
          type: { description: 'The condition type (Accepted).', type: 'string', maxLength: 316 },
          status: { description: 'True, False or Unknown.', type: 'string', enum: ['True', 'False', 'Unknown'] },
          reason: { description: 'A CamelCase reason: Applied, Invalid, Duplicate or KindChange.', type: 'string', maxLength: 1024 },
          message: { description: 'Why, in words (every problem when Invalid).', type: 'string', maxLength: 32768 },
          observedGeneration: { description: 'The metadata.generation that was reconciled.', type: 'integer', format: 'int64', minimum: 0 },
          lastTransitionTime: { description: 'When status last changed.', type: 'string', format: 'date-time' },
        },
      },
    },
  },
};

const GENERATED = 'generated by npm run chart:generate from handlers/class-schema.ts; do not edit';

/** The text of chart/crds/sharedcontexts.kslate.dev.yaml. */
export function crdYaml(version = '0.9.0'): string {
  const crd = {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: {
      name: 'sharedcontexts.kslate.dev',
      labels: { 'app.kubernetes.io/name': 'kslate', 'app.kubernetes.io/version': version },
    },
    spec: {
      group: 'kslate.dev',
      scope: 'Namespaced',
      names: { kind: 'SharedContext', listKind: 'SharedContextList', plural: 'sharedcontexts', singular: 'sharedcontext', shortNames: ['sctx'], categories: ['kslate'] },
      versions: [{
        name: 'v1',
        served: true,
        storage: true,
        subresources: { status: {} },
        additionalPrinterColumns: [
          { name: 'Accepted', type: 'string', jsonPath: '.status.conditions[?(@.type=="Accepted")].status' },
          { name: 'Reason', type: 'string', jsonPath: '.status.conditions[?(@.type=="Accepted")].reason' },
          { name: 'TTL', type: 'string', jsonPath: '.spec.ttl' },
          { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' },
        ],
        schema: { openAPIV3Schema: sharedContextOpenApiSchema() },
      }],
    },
  };
  // No YAML anchors: shared objects (the strength enum) are written out each time.
  const doc = new Document(crd, { aliasDuplicateObjects: false });
  doc.commentBefore = ` ${GENERATED}.\n`
    + ' CRDs in a chart\'s crds/ are installed once and never upgraded by helm; see chart/README.md.\n'
    + ' Unknown keys are refused: the API server prunes undeclared fields and kubectl (server-side\n'
    + ' field validation, Strict by default since 1.27) refuses them; rules a schema cannot state\n'
    + ' are checked by the worker (status condition Accepted=False).';
  return doc.toString({ lineWidth: 0 });
}

/** The text of chart/values.schema.json (draft-07). */
export function valuesSchemaJson(): string {
  const schema = toJsonSchema(ValuesSchema, { errorMode: 'throw' }) as SchemaNode;
  const { $schema, ...rest } = schema;
  const ordered = { $schema, $comment: 'generated by npm run chart:generate from chart/schema/values.ts; do not edit', ...rest };
  return `${JSON.stringify(ordered, null, 2)}\n`;
}
