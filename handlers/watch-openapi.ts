/**
 * The watch routes in the OpenAPI document (docs/watch.md): their parameters, the errors
 * they answer before a stream starts, and the JSON `data` of their events (`x-event-data`).
 */
import * as v from 'valibot';
import type { RouteDoc } from './openapi.js';
import { HISTORY_OPS, storedPremise, timestamp } from './responses.js';
import { watchClassParams, watchOperations, watchRecordParams } from './watch.js';

const d = v.description;
const count = v.pipe(v.number(), v.integer(), v.minValue(0));

/** `change`: one applied write, as history shows an applied row and get renders values. */
export const watchChange = v.strictObject({
  seq: v.pipe(count, d('The history row of the change.')),
  record: v.pipe(v.string(), d('The record, "<class>/<id>".')),
  field: v.string(),
  op: v.picklist(HISTORY_OPS),
  version: v.optional(v.pipe(count, d("The field's new version (an append: the entry's seq)."))),
  record_version: count,
  value: v.optional(v.pipe(v.unknown(), d('The new value (an append: the new entry); absent for a task field.'))),
  author: v.string(),
  identity_strength: v.optional(v.string()),
  evidence: v.optional(v.string()),
  based_on: v.optional(v.array(storedPremise)),
  invocation: v.optional(v.record(v.string(), v.unknown())),
  created_at: timestamp,
});

const endEvent = v.pipe(
  v.looseObject({
    reason: v.picklist(['slow', 'shutdown', 'revoked', 'recreated', 'max_age', 'error']),
    message: v.string(),
  }),
  d('The last event of a stream the gateway ends; for `error` also the error body (error, ...).'),
);

const recordEvent = v.union([v.strictObject({ record: v.string(), record_version: count }), watchChange, endEvent]);
const classEvent = v.union([v.strictObject({ class: v.string() }), watchChange, endEvent]);

const LAST_EVENT_ID = {
  name: 'Last-Event-ID',
  description: 'Resume right after this event (the id of the last event received); wins over the query parameter.',
};
const STREAM =
  'Server-Sent Events: `open` (where it starts), `change` (id: the resume token), comment-line heartbeats, and `end` when the gateway ends it. Every refusal is an ordinary JSON error before the stream; 429 RATE_LIMITED also when your identity already holds its maximum of open streams (--watch-max-streams-per-identity).';

export const WATCH_ROUTES: RouteDoc[] = [
  {
    method: watchOperations.watchRecord.method,
    path: watchOperations.watchRecord.path,
    operationId: 'watchRecord',
    tag: 'watch',
    summary: 'Watch a record',
    description: `The applied changes of one record in record_version order, fields outside your read scope left out. ${STREAM} Not served on Cloudflare Workers (404).`,
    scope: true,
    query: watchRecordParams,
    headers: [LAST_EVENT_ID],
    responses: {
      200: { description: 'The stream; event ids are record_versions.', schema: recordEvent, contentType: 'text/event-stream' },
    },
    errors: ['NOT_FOUND', 'NO_ROLE', 'MALFORMED', 'IDENTITY_MISMATCH', 'INTERNAL', 'UNAVAILABLE'],
    schemas: { WatchRecordEvent: recordEvent, WatchChange: watchChange },
  },
  {
    method: watchOperations.watchClass.method,
    path: watchOperations.watchClass.path,
    operationId: 'watchClass',
    tag: 'watch',
    summary: 'Watch a class',
    description: `Every applied change of every record of the class, in the change log's order, fields outside your read scope left out. ${STREAM} Not served on Cloudflare Workers (404).`,
    scope: true,
    query: watchClassParams,
    headers: [LAST_EVENT_ID],
    responses: {
      200: { description: 'The stream; event ids are cursors.', schema: classEvent, contentType: 'text/event-stream' },
    },
    errors: ['NOT_FOUND', 'NO_ROLE', 'MALFORMED', 'IDENTITY_MISMATCH', 'EXPIRED', 'INTERNAL', 'UNAVAILABLE'],
    schemas: { WatchClassEvent: classEvent },
  },
];
