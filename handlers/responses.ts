/**
 * The shapes of what the handlers answer, as valibot schemas: every success body and the
 * error body of every code. They are the single source of the response schemas of the
 * OpenAPI document (handlers/openapi.ts); tests validate real answers against them, so a
 * key a handler adds without saying so here fails a test. Pure: valibot only.
 */
import * as v from 'valibot';
import { CheckpointSchema, DurabilitySchema, FieldSchema, HistorySchema, RoleSchema, StrengthSchema } from './class-schema.js';
import type { ErrorCode } from './errors.js';

const d = v.description;

// ---- pieces ---------------------------------------------------------------------------------

const count = v.pipe(v.number(), v.integer(), v.minValue(0));
/** RFC 3339 with milliseconds and the server's offset (`2026-11-22T11:30:00.123+00:00`). */
export const timestamp = v.pipe(v.string(), v.isoTimestamp(), d('RFC 3339 with milliseconds and the server offset, e.g. 2026-11-22T11:30:00.123+00:00.'));
const record = v.pipe(v.string(), d('The record, "<class>/<id>".'));
const field = v.pipe(v.string(), d('The field name.'));
const author = v.pipe(v.string(), d('The identity, "<provider>:<name>", e.g. "apikey:alice".'));
const jsonValue = v.pipe(v.unknown(), d('Any JSON value.'));
const invocation = v.optional(v.pipe(v.record(v.string(), v.unknown()), d('The JSON object the writer sent as `invocation`, unchanged.')));
const version = v.pipe(count, d("The field's version (for an append field: its entry count)."));
const recordVersion = v.pipe(count, d('Rises with every applied write to any field of the record.'));

/** A premise as stored and shown (get, query, history): what the writer sent, or what was inferred. */
export const storedPremise = v.strictObject({
  field,
  version: count,
  kind: v.optional(v.literal('fence')),
  inferred: v.optional(v.pipe(v.literal(true), d('The gateway worked this premise out from the writer\'s reads in its X-Svc-Scope.'))),
});
const basedOn = v.optional(v.pipe(v.array(storedPremise), d('Premises on fields your role may read.')));

/** One entry of an append field. */
export const entryView = v.strictObject({
  seq: v.pipe(count, d('The entry number: 1 for the first entry of the field.')),
  value: jsonValue,
  author,
  identity_strength: v.optional(StrengthSchema),
  evidence: v.optional(v.string()),
  updated_at: timestamp,
  based_on: basedOn,
  invocation,
});

/** What every rendered field carries besides its value or lease: its version and the write's metadata. */
function fieldMeta() {
  return {
    version,
    author: v.optional(author),
    identity_strength: v.optional(StrengthSchema),
    evidence: v.optional(v.string()),
    based_on: basedOn,
    invocation,
    updated_at: timestamp,
  };
}

/** A versioned or soft field. */
export const valueFieldView = v.strictObject({
  value: jsonValue,
  ...fieldMeta(),
});

/** A task field: the lease, with `owner` and `lease_expires_at` only while someone holds it. */
export const taskFieldView = v.strictObject({
  ...fieldMeta(),
  owner: v.optional(author),
  lease_expires_at: v.optional(timestamp),
  lease_lapsed: v.optional(v.pipe(v.literal(true), d('The lease expired and nobody has claimed the task since.'))),
});

/** An append field: its entry count and entries (get: newest last, capped by entries_limit; query: the latest only). */
export const appendFieldView = v.strictObject({
  version,
  entries: v.array(entryView),
  next_entries_before: v.optional(
    v.pipe(v.string(), d('Older entries did not fit: send this as entries_before with fields=<this field>.')),
  ),
});

export const fieldView = v.union([valueFieldView, taskFieldView, appendFieldView]);

export const recordView = v.strictObject({
  record,
  record_version: recordVersion,
  fields: v.pipe(v.record(v.string(), fieldView), d('The fields that have a value, by name.')),
});

// ---- success bodies ---------------------------------------------------------------------------

export const classesResponse = v.strictObject({
  classes: v.array(v.strictObject({ name: v.string(), gone: v.optional(v.literal(true)) })),
});

export const classResponse = v.strictObject({
  name: v.string(),
  namespace: v.string(),
  fields: v.record(v.string(), FieldSchema),
  roles: v.record(v.string(), RoleSchema),
  ttl: v.nullable(v.string()),
  maxTtl: v.pipe(v.nullable(v.string()), d('The longest ttl_seconds a write may give a record; null: up to 3650d.')),
  history: v.pipe(HistorySchema, d('History retention: which rows the sweep purges ({} keeps every row).')),
  durability: v.pipe(
    DurabilitySchema,
    d('The default durability of the class\'s soft and append fields (a field\'s own durability wins; versioned and task fields are always strict). relaxed: a write touching only relaxed fields commits without waiting for its WAL flush, and a database crash may lose the last few hundred ms of such writes.'),
  ),
  checkpoint: CheckpointSchema,
  idPattern: v.nullable(v.string()),
  minIdentityStrength: StrengthSchema,
  requireEvidence: v.boolean(),
  gone: v.boolean(),
});

export const getResponse = v.strictObject({
  ...recordView.entries,
  expires_at: v.optional(v.pipe(timestamp, d("When the record expires: its own expiry (ttl_seconds) or its last write plus the class ttl; absent when never."))),
  omitted_fields: v.optional(v.pipe(v.array(v.string()), d('Fields that did not fit in the response (about 16 MiB); read them with fields=.'))),
});

export const queryResponse = v.strictObject({
  class: v.string(),
  records: v.array(recordView),
  next_after: v.optional(v.pipe(v.string(), d('More records remain: send this as after.'))),
});

const expiresAt = v.optional(v.pipe(timestamp, d('When the record expires, after this write set or extended it (ttl_seconds).')));
/** Every write's answer to a dry run (`dry_run=true`) carries it; nothing was written. */
export const dryRun = v.optional(
  v.pipe(v.literal(true), d('A dry run: what the write would answer now (the versions it would get); nothing was written.')),
);

export const putResponse = v.strictObject({ record, field, version, record_version: recordVersion, expires_at: expiresAt, dry_run: dryRun });

export const appendResponse = v.strictObject({ record, field, seq: count, record_version: recordVersion, expires_at: expiresAt, dry_run: dryRun });

export const claimResponse = v.strictObject({
  record,
  field,
  owner: v.optional(author),
  lease_expires_at: v.optional(timestamp),
  version,
  record_version: recordVersion,
  took_over_from: v.optional(v.pipe(author, d('The previous owner, whose lease had expired.'))),
  dry_run: dryRun,
});

export const transactionResponse = v.strictObject({
  record,
  record_version: v.pipe(recordVersion, d('The one record version every write of the transaction got.')),
  transaction: v.pipe(v.string(), d('The id of the transaction, on each of its history rows.')),
  expires_at: expiresAt,
  writes: v.pipe(
    v.array(
      v.strictObject({
        op: v.picklist(['put', 'append', 'claim']),
        field,
        version: v.optional(version),
        seq: v.optional(count),
        owner: v.optional(author),
        lease_expires_at: v.optional(timestamp),
        took_over_from: v.optional(author),
      }),
    ),
    d("Each write's answer in order, as the single write answers without record and record_version."),
  ),
});

export const checkpointSaveResponse = v.strictObject({
  record,
  role: v.string(),
  checkpoint_id: count,
  record_version: recordVersion,
  dry_run: dryRun,
});

export const checkpointLoadResponse = v.strictObject({
  record,
  role: v.string(),
  document: v.nullable(v.record(v.string(), v.unknown())),
  record_version: v.pipe(count, d('The record version when the checkpoint was saved; 0 without a checkpoint.')),
  changed_fields: v.array(
    v.strictObject({ field, version, author: v.nullable(v.string()), evidence: v.nullable(v.string()) }),
  ),
});

export const HISTORY_OPS = ['put', 'append', 'claim', 'release', 'takeover'] as const;
export const HISTORY_OUTCOMES = [
  'applied',
  'stale',
  'stale_premise',
  'held',
  'scope_denied',
  'weak_identity',
  'evidence_required',
  'identity_mismatch',
  // A write of a refused transaction (issue 33): not applied because the write at failed_index was refused.
  'not_applied',
] as const;

export const historyRow = v.strictObject({
  seq: count,
  field,
  op: v.picklist(HISTORY_OPS),
  version: v.optional(v.pipe(count, d('Applied writes only.'))),
  record_version: v.optional(count),
  value: v.optional(jsonValue),
  value_size: v.optional(v.pipe(count, d('Bytes of the JSON text of a value kept only as its size and digest (over 64 KiB on a scope, evidence or identity rejection).'))),
  value_sha256: v.optional(v.pipe(v.string(), v.hexadecimal(), d('Hex SHA-256 of that JSON text.'))),
  author,
  identity_strength: v.optional(StrengthSchema),
  evidence: v.optional(v.string()),
  expected_version: v.optional(count),
  based_on: basedOn,
  invocation,
  transaction: v.optional(
    v.pipe(
      v.strictObject({
        id: v.pipe(v.string(), d('The transaction that made this attempt.')),
        index: v.pipe(count, d('Which write of the transaction (from 0).')),
        failed_index: v.optional(v.pipe(count, d('On a not_applied row: the write whose refusal refused the transaction.'))),
      }),
      d('Rows of a transaction (docs/api.md, transaction): one per write.'),
    ),
  ),
  outcome: v.picklist(HISTORY_OUTCOMES),
  created_at: timestamp,
});

export const historyResponse = v.strictObject({
  record,
  history: v.array(historyRow),
  truncated_before: v.optional(
    v.pipe(v.string(), v.isoTimestamp(), d("Class history retention purged rows of this record up to this time: the page reaches where rows may be missing (the record's class `history`).")),
  ),
  next_before: v.optional(v.pipe(v.string(), d('Older rows remain: send this as before.'))),
});

// ---- error bodies -----------------------------------------------------------------------------

const nullableString = v.nullable(v.string());
const where = { record: v.optional(record), field: v.optional(field), class: v.optional(v.string()) };

/** The keys each code's body carries besides `error` and `message` (handlers/errors.ts `extra`). */
const ERROR_EXTRAS: Record<ErrorCode, v.ObjectEntries> = {
  MALFORMED: where,
  UNAUTHENTICATED: {},
  NO_ROLE: { record: where.record, class: where.class },
  SCOPE_DENIED: { record: where.record, field },
  WEAK_IDENTITY: { record: where.record, field: where.field, required: StrengthSchema, presented: StrengthSchema },
  IDENTITY_MISMATCH: { record: where.record, field: where.field },
  NOT_FOUND: { record: where.record, class: where.class },
  STALE: {
    field,
    your_version: count,
    current_version: count,
    current_value: v.pipe(v.unknown(), d('null when your role may write but not read the field.')),
    current_author: nullableString,
    current_evidence: nullableString,
    current_updated_at: v.nullable(timestamp),
    diff: v.pipe(v.string(), d('Unified diff of the current and your value as pretty-printed JSON; a note when either is over 64 KiB or 500 lines; empty when your role may not read the field.')),
  },
  STALE_PREMISE: {
    record,
    field,
    current_version: count,
    current_author: nullableString,
    moved: v.array(
      v.strictObject({ field, your_version: count, current_version: count, current_author: nullableString, current_evidence: nullableString }),
    ),
  },
  HELD: { field, owner: author, lease_expires_at: timestamp, version },
  CLASS_GONE: { record: where.record, class: where.class },
  EVIDENCE_REQUIRED: { record, field },
  UNKNOWN_FIELD: { record: where.record, class: where.class, field },
  NOT_WRITABLE: { record, field },
  NOT_APPEND_FIELD: { record, field },
  NOT_TASK_FIELD: { record, field },
  INVALID_CHECKPOINT: { record, field: where.field },
  RATE_LIMITED: {},
  INTERNAL: { request_id: v.pipe(v.string(), d('The id of the log line with the cause; quote it to the operator.')) },
  UNAVAILABLE: {
    outcome: v.optional(
      v.pipe(
        v.literal('unknown'),
        d('Present when the database connection broke or stopped answering after the request was sent: a write may or may not have been applied; read before retrying it (docs/ha.md).'),
      ),
    ),
  },
  METHOD_NOT_ALLOWED: {},
  IDEMPOTENCY_KEY_REUSED: {},
  IDEMPOTENCY_KEY_IN_USE: { retry_after: v.pipe(v.number(), d('Seconds to wait before retrying with the same key (also in Retry-After).')) },
  EXPIRED: {
    class: v.string(),
    oldest: v.pipe(v.string(), d('The oldest class watch cursor still in the retained window: re-read what you need, then resume from it.')),
  },
};

type ErrorBodySchema = ReturnType<typeof errorBody>;

/** The codes a write of a transaction can be refused with: its body then carries `index` too. */
const WRITE_CODES: ReadonlySet<ErrorCode> = new Set<ErrorCode>([
  'MALFORMED', 'UNKNOWN_FIELD', 'SCOPE_DENIED', 'WEAK_IDENTITY', 'NOT_WRITABLE', 'NOT_APPEND_FIELD', 'NOT_TASK_FIELD',
  'IDENTITY_MISMATCH', 'HELD', 'EVIDENCE_REQUIRED', 'STALE', 'INVALID_CHECKPOINT', 'STALE_PREMISE',
]);

const TX_INDEX = {
  index: v.optional(v.pipe(v.number(), v.integer(), d('A transaction: which write (from 0) was refused; nothing was written.'))),
};

function errorBody(code: ErrorCode, extra: v.ObjectEntries) {
  return v.strictObject({
    error: v.literal(code),
    message: v.pipe(v.string(), d('What happened and what to do, in one or two sentences (at most 1,024 characters).')),
    ...extra,
    ...(WRITE_CODES.has(code) ? TX_INDEX : {}) as v.ObjectEntries,
    dry_run: v.optional(v.pipe(v.literal(true), d('A dry run (`dry_run=true`): the rejection the write would get now; nothing was written.'))),
  });
}

/** The error body of every code: `{error, message, ...}`, identical on HTTP, MCP and gRPC. */
export const ERROR_BODIES = Object.fromEntries(
  (Object.entries(ERROR_EXTRAS) as [ErrorCode, v.ObjectEntries][]).map(([code, extra]) => [code, errorBody(code, extra)]),
) as Record<ErrorCode, ErrorBodySchema>;

/** `STALE_PREMISE` → `StalePremiseError`: the component name of a code's body. */
export function errorSchemaName(code: ErrorCode): string {
  return `${code
    .toLowerCase()
    .split('_')
    .map((w) => w[0].toUpperCase() + w.slice(1))
    .join('')}Error`;
}

/**
 * The named schemas of the API: component names of the OpenAPI document. A schema used inside
 * another (a premise inside a body) is referenced by its name there.
 */
export const RESPONSE_SCHEMAS: Record<string, v.GenericSchema> = {
  StoredPremise: storedPremise,
  Entry: entryView,
  ValueField: valueFieldView,
  TaskField: taskFieldView,
  AppendField: appendFieldView,
  Field: fieldView,
  Record: recordView,
  ClassesResponse: classesResponse,
  ClassResponse: classResponse,
  GetResponse: getResponse,
  QueryResponse: queryResponse,
  PutResponse: putResponse,
  AppendResponse: appendResponse,
  ClaimResponse: claimResponse,
  TransactionResponse: transactionResponse,
  CheckpointSaveResponse: checkpointSaveResponse,
  CheckpointLoadResponse: checkpointLoadResponse,
  HistoryRow: historyRow,
  HistoryResponse: historyResponse,
  ...Object.fromEntries(Object.entries(ERROR_BODIES).map(([code, s]) => [errorSchemaName(code as ErrorCode), s])),
};
