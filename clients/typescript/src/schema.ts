/**
 * Generated from docs/openapi.json by openapi-typescript 7: do not edit.
 * Regenerate with `npm run client:generate` (test/client/generated.test.ts checks it is fresh).
 */
export interface paths {
    "/v1/classes": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** List the classes you have a role in */
        get: operations["classes"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/classes/{name}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Read a class definition
         * @description Fields (kinds, types, enums), roles and what each may read and write, checkpoint settings. Needs a role in the class.
         */
        get: operations["class"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/records/{class}/{id}/history": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Read the history of a record
         * @description Every write attempt, rejected ones included, newest first; only rows of fields your role may read.
         */
        get: operations["history"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/records/{class}/{id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Read a record
         * @description Every field your role may read that has a value, with its version (send it back as expected_version) and author. With X-Svc-Scope, the versions read become the premises of later writes in that scope.
         */
        get: operations["get"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/records/{class}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Find records by field values
         * @description Every query parameter other than limit and after filters on a field: compared as a JSON string and, when it parses as JSON, as that value too; a task field matches its owner. Oldest first.
         */
        get: operations["query"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/records/{class}/{id}/checkpoint": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Load your role's checkpoint
         * @description The document and the fields written since it was saved (re-read them before acting on it).
         */
        get: operations["checkpointLoad"];
        /**
         * Save your role's checkpoint
         * @description A progress document of your role on an existing record, so that another agent can continue the work; the latest wins.
         */
        put: operations["checkpointSave"];
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/records/{class}/{id}/fields/{field}/claim": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        /**
         * Take, renew or release a task lease
         * @description lease_seconds 0 releases; an expired lease is taken over (took_over_from). The body may be omitted (the field's default lease).
         */
        put: operations["claim"];
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/records/{class}/{id}/fields/{field}/entries": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Add an entry to an append field
         * @description Appends never conflict; the field's version is its entry count. evidence is always required.
         */
        post: operations["append"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/records/{class}/{id}/fields/{field}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        /**
         * Write a field (compare-and-set)
         * @description expected_version is the version you read (0: the field has no value yet); STALE when someone wrote it since. Soft fields ignore it. based_on premises must still hold (STALE_PREMISE).
         */
        put: operations["put"];
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/records/{class}/{id}/transactions": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Write several fields of one record, all or nothing
         * @description Puts, appends and claims (1 to 64) applied in order with one new record_version, or none. Each write is checked as it would be alone, against the record as the earlier writes leave it; a refusal is the failing write's own error body plus `index`. History keeps one row per write with the transaction's id (docs/api.md, Transactions).
         */
        post: operations["transaction"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/records/{class}/{id}/watch": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Watch a record
         * @description The applied changes of one record in record_version order, fields outside your read scope left out. Server-Sent Events: `open` (where it starts), `change` (id: the resume token), comment-line heartbeats, and `end` when the gateway ends it. Every refusal is an ordinary JSON error before the stream; 429 RATE_LIMITED also when your identity already holds its maximum of open streams (--watch-max-streams-per-identity). Not served on Cloudflare Workers (404).
         */
        get: operations["watchRecord"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/classes/{class}/watch": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Watch a class
         * @description Every applied change of every record of the class, in the change log's order, fields outside your read scope left out. Server-Sent Events: `open` (where it starts), `change` (id: the resume token), comment-line heartbeats, and `end` when the gateway ends it. Every refusal is an ordinary JSON error before the stream; 429 RATE_LIMITED also when your identity already holds its maximum of open streams (--watch-max-streams-per-identity). Not served on Cloudflare Workers (404).
         */
        get: operations["watchClass"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/.well-known/oauth-protected-resource": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Protected resource metadata (RFC 9728)
         * @description Where to get a token for this API: `authorization_servers` names the OIDC issuer of --oidc-issuer (docs/identity.md). MCP clients that implement the MCP authorization spec read it after a 401 and sign the user in there. Without an oidc provider in --identity there is no authorization server: 404 NOT_FOUND saying which credential to send.
         */
        get: operations["protectedResource"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/.well-known/oauth-protected-resource/mcp": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Protected resource metadata of /mcp (RFC 9728)
         * @description Where to get a token for the MCP endpoint /mcp: `authorization_servers` names the OIDC issuer of --oidc-issuer (docs/identity.md). MCP clients that implement the MCP authorization spec read it after a 401 and sign the user in there. Without an oidc provider in --identity there is no authorization server: 404 NOT_FOUND saying which credential to send.
         */
        get: operations["protectedResourceMcp"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/.well-known/oauth-protected-resource/mcp/session": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Protected resource metadata of /mcp/session (RFC 9728)
         * @description Where to get a token for the MCP endpoint /mcp/session: `authorization_servers` names the OIDC issuer of --oidc-issuer (docs/identity.md). MCP clients that implement the MCP authorization spec read it after a 401 and sign the user in there. Without an oidc provider in --identity there is no authorization server: 404 NOT_FOUND saying which credential to send.
         */
        get: operations["protectedResourceMcpSession"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/healthz": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Liveness
         * @description The process is up; independent of the database, 200 while draining too. Also on the metrics port.
         */
        get: operations["healthz"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/readyz": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Readiness
         * @description Ready when the database answers and its schema is present; also on the metrics port.
         */
        get: operations["readyz"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/openapi.json": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * This document
         * @description The OpenAPI 3.1 document of this API, without a credential (it is the same for every caller and names no class). Cached: public, max-age=3600, with an ETag.
         */
        get: operations["openapi"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/mcp": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * MCP server-to-client stream (not offered)
         * @description This stateless server keeps no sessions and offers no stream: the answer is 405 with a JSON-RPC error (after the credential check).
         */
        get: operations["mcpStream"];
        put?: never;
        /**
         * MCP (streamable HTTP, stateless)
         * @description JSON-RPC 2.0 messages of the Model Context Protocol; the six tools carry the operations above with the same answers (docs/mcp.md). Send Accept: application/json, text/event-stream. A refusal of a tool call is its error result, not an HTTP error.
         */
        post: operations["mcp"];
        /**
         * MCP session end (no sessions)
         * @description This stateless server keeps no sessions and offers no stream: the answer is 405 with a JSON-RPC error (after the credential check).
         */
        delete: operations["mcpEndSession"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/mcp/session": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * MCP session event stream
         * @description The session's server-to-client stream (Accept: text/event-stream, Mcp-Session-Id): notifications/resources/updated of its subscriptions, one JSON-RPC message per event. One per session.
         */
        get: operations["mcpSessionStream"];
        put?: never;
        /**
         * MCP with a session (resource subscriptions)
         * @description The MCP server of /mcp with a session per client, for resources/subscribe on record resources (docs/mcp.md, Subscriptions). initialize (without Mcp-Session-Id) opens a session and answers its Mcp-Session-Id; every later request sends it. The session lives on the replica that answered initialize: route this path by Mcp-Session-Id. On Cloudflare Workers this path answers 404 NOT_FOUND.
         */
        post: operations["mcpSession"];
        /**
         * MCP session end
         * @description Ends the session: its subscriptions stop and its stream closes.
         */
        delete: operations["mcpSessionEnd"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
}
export type webhooks = Record<string, never>;
export interface components {
    schemas: {
        AppendBody: {
            /** @description The entry: any JSON matching the field's type. */
            entry: unknown;
            evidence?: string | null;
            /** @description Premises: fields (with the versions you read) this write rests on. [] = rests on nothing (disables inference). */
            based_on?: components["schemas"]["Premise"][];
            /** @description true: the write rests on nothing (the same as based_on: []). */
            declare_no_premises?: boolean;
            /** @description Optional JSON object, at most 1 KiB, identifying this call (run id, tool call id); stored with the write. */
            invocation?: Record<string, never>;
            /** @description Optional: the record expires this many seconds after this write, unless it already expires later (the expiry is set or extended, never brought forward); at most the class's maxTtl. Without it the class ttl applies. */
            ttl_seconds?: number;
        };
        AppendField: {
            /** @description The field's version (for an append field: its entry count). */
            version: number;
            entries: components["schemas"]["Entry"][];
            /** @description Older entries did not fit: send this as entries_before with fields=<this field>. */
            next_entries_before?: string;
        };
        AppendResponse: {
            /** @description The record, "<class>/<id>". */
            record: string;
            /** @description The field name. */
            field: string;
            seq: number;
            /** @description Rises with every applied write to any field of the record. */
            record_version: number;
            /**
             * Format: date-time
             * @description When the record expires, after this write set or extended it (ttl_seconds).
             */
            expires_at?: string;
            /**
             * @description A dry run: what the write would answer now (the versions it would get); nothing was written.
             * @constant
             */
            dry_run?: true;
        };
        CheckpointLoadResponse: {
            /** @description The record, "<class>/<id>". */
            record: string;
            role: string;
            document: {
                [key: string]: unknown;
            } | null;
            /** @description The record version when the checkpoint was saved; 0 without a checkpoint. */
            record_version: number;
            changed_fields: {
                /** @description The field name. */
                field: string;
                /** @description The field's version (for an append field: its entry count). */
                version: number;
                author: string | null;
                evidence: string | null;
            }[];
        };
        CheckpointSaveBody: {
            /** @description save: the progress document, with every section the class requires. */
            document: Record<string, never>;
        };
        CheckpointSaveResponse: {
            /** @description The record, "<class>/<id>". */
            record: string;
            role: string;
            checkpoint_id: number;
            /** @description Rises with every applied write to any field of the record. */
            record_version: number;
            /**
             * @description A dry run: what the write would answer now (the versions it would get); nothing was written.
             * @constant
             */
            dry_run?: true;
        };
        ClaimBody: {
            /** @description Lease length; 0 releases; omit for the field's default. */
            lease_seconds?: number;
            /** @description true: extend the lease you hold. */
            renew?: boolean;
            /** @description Optional JSON object, at most 1 KiB, identifying this call (run id, tool call id); stored with the write. */
            invocation?: Record<string, never>;
        };
        ClaimResponse: {
            /** @description The record, "<class>/<id>". */
            record: string;
            /** @description The field name. */
            field: string;
            /** @description The identity, "<provider>:<name>", e.g. "apikey:alice". */
            owner?: string;
            /**
             * Format: date-time
             * @description RFC 3339 with milliseconds and the server offset, e.g. 2026-11-22T11:30:00.123+00:00.
             */
            lease_expires_at?: string;
            /** @description The field's version (for an append field: its entry count). */
            version: number;
            /** @description Rises with every applied write to any field of the record. */
            record_version: number;
            /** @description The previous owner, whose lease had expired. */
            took_over_from?: string;
            /**
             * @description A dry run: what the write would answer now (the versions it would get); nothing was written.
             * @constant
             */
            dry_run?: true;
        };
        ClassGoneError: {
            /** @constant */
            error: "CLASS_GONE";
            /** @description What happened and what to do, in one or two sentences (at most 1,024 characters). */
            message: string;
            /** @description The record, "<class>/<id>". */
            record?: string;
            class?: string;
            /**
             * @description A dry run (`dry_run=true`): the rejection the write would get now; nothing was written.
             * @constant
             */
            dry_run?: true;
        };
        ClassResponse: {
            name: string;
            namespace: string;
            fields: {
                [key: string]: {
                    /** @enum {string} */
                    kind: "versioned" | "soft" | "append" | "task";
                    /** @enum {string} */
                    type?: "string" | "integer" | "number" | "boolean" | "object" | "array" | "any";
                    enum?: unknown[];
                    requireEvidence?: boolean;
                    /** @enum {string} */
                    minIdentityStrength?: "pod-bound" | "sa-bound" | "issuer-declared" | "shared-secret";
                    leaseSeconds?: number;
                    /** @enum {string} */
                    durability?: "strict" | "relaxed";
                };
            };
            roles: {
                [key: string]: {
                    subjects: string[];
                    /** @default [] */
                    read: string[];
                    /** @default [] */
                    write: string[];
                };
            };
            ttl: string | null;
            /** @description The longest ttl_seconds a write may give a record; null: up to 3650d. */
            maxTtl: string | null;
            /** @description History retention: which rows the sweep purges ({} keeps every row). */
            history: {
                maxAge?: string;
                keepLast?: number;
                rejectedMaxAge?: string;
            };
            /**
             * @description The default durability of the class's soft and append fields (a field's own durability wins; versioned and task fields are always strict). relaxed: a write touching only relaxed fields commits without waiting for its WAL flush, and a database crash may lose the last few hundred ms of such writes.
             * @enum {string}
             */
            durability: "strict" | "relaxed";
            checkpoint: {
                sections?: string[];
                requiredForResolve?: string[];
            };
            idPattern: string | null;
            /** @enum {string} */
            minIdentityStrength: "pod-bound" | "sa-bound" | "issuer-declared" | "shared-secret";
            requireEvidence: boolean;
            gone: boolean;
        };
        ClassesResponse: {
            classes: {
                name: string;
                /** @constant */
                gone?: true;
            }[];
        };
        Entry: {
            /** @description The entry number: 1 for the first entry of the field. */
            seq: number;
            /** @description Any JSON value. */
            value: unknown;
            /** @description The identity, "<provider>:<name>", e.g. "apikey:alice". */
            author: string;
            /** @enum {string} */
            identity_strength?: "pod-bound" | "sa-bound" | "issuer-declared" | "shared-secret";
            evidence?: string;
            /**
             * Format: date-time
             * @description RFC 3339 with milliseconds and the server offset, e.g. 2026-11-22T11:30:00.123+00:00.
             */
            updated_at: string;
            /** @description Premises on fields your role may read. */
            based_on?: components["schemas"]["StoredPremise"][];
            /** @description The JSON object the writer sent as `invocation`, unchanged. */
            invocation?: {
                [key: string]: unknown;
            };
        };
        EvidenceRequiredError: {
            /**
             * @description discriminator enum property added by openapi-typescript
             * @enum {string}
             */
            error: "EVIDENCE_REQUIRED";
            /** @description What happened and what to do, in one or two sentences (at most 1,024 characters). */
            message: string;
            /** @description The record, "<class>/<id>". */
            record: string;
            /** @description The field name. */
            field: string;
            /** @description A transaction: which write (from 0) was refused; nothing was written. */
            index?: number;
            /**
             * @description A dry run (`dry_run=true`): the rejection the write would get now; nothing was written.
             * @constant
             */
            dry_run?: true;
        };
        ExpiredError: {
            /** @constant */
            error: "EXPIRED";
            /** @description What happened and what to do, in one or two sentences (at most 1,024 characters). */
            message: string;
            class: string;
            /** @description The oldest class watch cursor still in the retained window: re-read what you need, then resume from it. */
            oldest: string;
            /**
             * @description A dry run (`dry_run=true`): the rejection the write would get now; nothing was written.
             * @constant
             */
            dry_run?: true;
        };
        Field: components["schemas"]["ValueField"] | components["schemas"]["TaskField"] | components["schemas"]["AppendField"];
        GetResponse: {
            /** @description The record, "<class>/<id>". */
            record: string;
            /** @description Rises with every applied write to any field of the record. */
            record_version: number;
            /** @description The fields that have a value, by name. */
            fields: {
                [key: string]: components["schemas"]["Field"];
            };
            /**
             * Format: date-time
             * @description When the record expires: its own expiry (ttl_seconds) or its last write plus the class ttl; absent when never.
             */
            expires_at?: string;
            /** @description Fields that did not fit in the response (about 16 MiB); read them with fields=. */
            omitted_fields?: string[];
        };
        Health: {
            /** @constant */
            status: "ok";
        };
        HeldError: {
            /**
             * @description discriminator enum property added by openapi-typescript
             * @enum {string}
             */
            error: "HELD";
            /** @description What happened and what to do, in one or two sentences (at most 1,024 characters). */
            message: string;
            /** @description The field name. */
            field: string;
            /** @description The identity, "<provider>:<name>", e.g. "apikey:alice". */
            owner: string;
            /**
             * Format: date-time
             * @description RFC 3339 with milliseconds and the server offset, e.g. 2026-11-22T11:30:00.123+00:00.
             */
            lease_expires_at: string;
            /** @description The field's version (for an append field: its entry count). */
            version: number;
            /** @description A transaction: which write (from 0) was refused; nothing was written. */
            index?: number;
            /**
             * @description A dry run (`dry_run=true`): the rejection the write would get now; nothing was written.
             * @constant
             */
            dry_run?: true;
        };
        HistoryResponse: {
            /** @description The record, "<class>/<id>". */
            record: string;
            history: components["schemas"]["HistoryRow"][];
            /**
             * Format: date-time
             * @description Class history retention purged rows of this record up to this time: the page reaches where rows may be missing (the record's class `history`).
             */
            truncated_before?: string;
            /** @description Older rows remain: send this as before. */
            next_before?: string;
        };
        HistoryRow: {
            seq: number;
            /** @description The field name. */
            field: string;
            /** @enum {string} */
            op: "put" | "append" | "claim" | "release" | "takeover";
            /** @description Applied writes only. */
            version?: number;
            record_version?: number;
            /** @description Any JSON value. */
            value?: unknown;
            /** @description Bytes of the JSON text of a value kept only as its size and digest (over 64 KiB on a scope, evidence or identity rejection). */
            value_size?: number;
            /** @description Hex SHA-256 of that JSON text. */
            value_sha256?: string;
            /** @description The identity, "<provider>:<name>", e.g. "apikey:alice". */
            author: string;
            /** @enum {string} */
            identity_strength?: "pod-bound" | "sa-bound" | "issuer-declared" | "shared-secret";
            evidence?: string;
            expected_version?: number;
            /** @description Premises on fields your role may read. */
            based_on?: components["schemas"]["StoredPremise"][];
            /** @description The JSON object the writer sent as `invocation`, unchanged. */
            invocation?: {
                [key: string]: unknown;
            };
            /** @description Rows of a transaction (docs/api.md, transaction): one per write. */
            transaction?: {
                /** @description The transaction that made this attempt. */
                id: string;
                /** @description Which write of the transaction (from 0). */
                index: number;
                /** @description On a not_applied row: the write whose refusal refused the transaction. */
                failed_index?: number;
            };
            /** @enum {string} */
            outcome: "applied" | "stale" | "stale_premise" | "held" | "scope_denied" | "weak_identity" | "evidence_required" | "identity_mismatch" | "not_applied";
            /**
             * Format: date-time
             * @description RFC 3339 with milliseconds and the server offset, e.g. 2026-11-22T11:30:00.123+00:00.
             */
            created_at: string;
        };
        IdempotencyKeyInUseError: {
            /**
             * @description discriminator enum property added by openapi-typescript
             * @enum {string}
             */
            error: "IDEMPOTENCY_KEY_IN_USE";
            /** @description What happened and what to do, in one or two sentences (at most 1,024 characters). */
            message: string;
            /** @description Seconds to wait before retrying with the same key (also in Retry-After). */
            retry_after: number;
            /**
             * @description A dry run (`dry_run=true`): the rejection the write would get now; nothing was written.
             * @constant
             */
            dry_run?: true;
        };
        IdempotencyKeyReusedError: {
            /**
             * @description discriminator enum property added by openapi-typescript
             * @enum {string}
             */
            error: "IDEMPOTENCY_KEY_REUSED";
            /** @description What happened and what to do, in one or two sentences (at most 1,024 characters). */
            message: string;
            /**
             * @description A dry run (`dry_run=true`): the rejection the write would get now; nothing was written.
             * @constant
             */
            dry_run?: true;
        };
        IdentityMismatchError: {
            /**
             * @description discriminator enum property added by openapi-typescript
             * @enum {string}
             */
            error: "IDENTITY_MISMATCH";
            /** @description What happened and what to do, in one or two sentences (at most 1,024 characters). */
            message: string;
            /** @description The record, "<class>/<id>". */
            record?: string;
            /** @description The field name. */
            field?: string;
            /** @description A transaction: which write (from 0) was refused; nothing was written. */
            index?: number;
            /**
             * @description A dry run (`dry_run=true`): the rejection the write would get now; nothing was written.
             * @constant
             */
            dry_run?: true;
        };
        InternalError: {
            /** @constant */
            error: "INTERNAL";
            /** @description What happened and what to do, in one or two sentences (at most 1,024 characters). */
            message: string;
            /** @description The id of the log line with the cause; quote it to the operator. */
            request_id: string;
            /**
             * @description A dry run (`dry_run=true`): the rejection the write would get now; nothing was written.
             * @constant
             */
            dry_run?: true;
        };
        InvalidCheckpointError: {
            /**
             * @description discriminator enum property added by openapi-typescript
             * @enum {string}
             */
            error: "INVALID_CHECKPOINT";
            /** @description What happened and what to do, in one or two sentences (at most 1,024 characters). */
            message: string;
            /** @description The record, "<class>/<id>". */
            record: string;
            /** @description The field name. */
            field?: string;
            /** @description A transaction: which write (from 0) was refused; nothing was written. */
            index?: number;
            /**
             * @description A dry run (`dry_run=true`): the rejection the write would get now; nothing was written.
             * @constant
             */
            dry_run?: true;
        };
        /** @description A JSON-RPC 2.0 error. A message over the size limit has code -32000 and the MALFORMED body as data. */
        JsonRpcError: {
            /** @constant */
            jsonrpc: "2.0";
            error: {
                code: number;
                message: string;
                data?: unknown;
            };
            id: (string | number) | null;
        };
        /** @description A JSON-RPC 2.0 request or notification of the Model Context Protocol (initialize, tools/list, tools/call, ...). */
        JsonRpcMessage: {
            /** @constant */
            jsonrpc: "2.0";
        };
        /** @description The JSON-RPC 2.0 response (result or error); a refused tool call is a result with isError and the error body of the operation. */
        JsonRpcResponse: {
            /** @constant */
            jsonrpc: "2.0";
            id: string | number;
        };
        MalformedError: {
            /** @constant */
            error: "MALFORMED";
            /** @description What happened and what to do, in one or two sentences (at most 1,024 characters). */
            message: string;
            /** @description The record, "<class>/<id>". */
            record?: string;
            /** @description The field name. */
            field?: string;
            class?: string;
            /** @description A transaction: which write (from 0) was refused; nothing was written. */
            index?: number;
            /**
             * @description A dry run (`dry_run=true`): the rejection the write would get now; nothing was written.
             * @constant
             */
            dry_run?: true;
        };
        MethodNotAllowedError: {
            /** @constant */
            error: "METHOD_NOT_ALLOWED";
            /** @description What happened and what to do, in one or two sentences (at most 1,024 characters). */
            message: string;
            /**
             * @description A dry run (`dry_run=true`): the rejection the write would get now; nothing was written.
             * @constant
             */
            dry_run?: true;
        };
        NoRoleError: {
            /**
             * @description discriminator enum property added by openapi-typescript
             * @enum {string}
             */
            error: "NO_ROLE";
            /** @description What happened and what to do, in one or two sentences (at most 1,024 characters). */
            message: string;
            /** @description The record, "<class>/<id>". */
            record?: string;
            class?: string;
            /**
             * @description A dry run (`dry_run=true`): the rejection the write would get now; nothing was written.
             * @constant
             */
            dry_run?: true;
        };
        NotAppendFieldError: {
            /**
             * @description discriminator enum property added by openapi-typescript
             * @enum {string}
             */
            error: "NOT_APPEND_FIELD";
            /** @description What happened and what to do, in one or two sentences (at most 1,024 characters). */
            message: string;
            /** @description The record, "<class>/<id>". */
            record: string;
            /** @description The field name. */
            field: string;
            /** @description A transaction: which write (from 0) was refused; nothing was written. */
            index?: number;
            /**
             * @description A dry run (`dry_run=true`): the rejection the write would get now; nothing was written.
             * @constant
             */
            dry_run?: true;
        };
        NotFoundError: {
            /** @constant */
            error: "NOT_FOUND";
            /** @description What happened and what to do, in one or two sentences (at most 1,024 characters). */
            message: string;
            /** @description The record, "<class>/<id>". */
            record?: string;
            class?: string;
            /**
             * @description A dry run (`dry_run=true`): the rejection the write would get now; nothing was written.
             * @constant
             */
            dry_run?: true;
        };
        NotTaskFieldError: {
            /**
             * @description discriminator enum property added by openapi-typescript
             * @enum {string}
             */
            error: "NOT_TASK_FIELD";
            /** @description What happened and what to do, in one or two sentences (at most 1,024 characters). */
            message: string;
            /** @description The record, "<class>/<id>". */
            record: string;
            /** @description The field name. */
            field: string;
            /** @description A transaction: which write (from 0) was refused; nothing was written. */
            index?: number;
            /**
             * @description A dry run (`dry_run=true`): the rejection the write would get now; nothing was written.
             * @constant
             */
            dry_run?: true;
        };
        NotWritableError: {
            /**
             * @description discriminator enum property added by openapi-typescript
             * @enum {string}
             */
            error: "NOT_WRITABLE";
            /** @description What happened and what to do, in one or two sentences (at most 1,024 characters). */
            message: string;
            /** @description The record, "<class>/<id>". */
            record: string;
            /** @description The field name. */
            field: string;
            /** @description A transaction: which write (from 0) was refused; nothing was written. */
            index?: number;
            /**
             * @description A dry run (`dry_run=true`): the rejection the write would get now; nothing was written.
             * @constant
             */
            dry_run?: true;
        };
        Premise: {
            /** @description A field of the same record your decision relies on. */
            field: string;
            /** @description The version of that field you read (0 = it had no value). */
            version: number;
            /**
             * @description "fence": a task field; the write holds only while you still hold its lease.
             * @enum {string}
             */
            kind?: "fence";
        };
        ProtectedResourceMetadata: {
            /** @description The resource this document describes: the gateway's origin, or the origin and the MCP path. */
            resource: string;
            /** @description The issuer of --oidc-issuer: where a client gets a token for this gateway. */
            authorization_servers: string[];
            /** @description Tokens go in the Authorization header only. */
            bearer_methods_supported: "header"[];
            /** @constant */
            resource_name: "kslate";
        };
        PutBody: {
            /** @description The new value: any JSON matching the field's type and enum. */
            value: unknown;
            /** @description The field version you last read; 0 if it has no value yet. Required on versioned fields. */
            expected_version?: number;
            /** @description Why this value is right; required where the class or field demands it. */
            evidence?: string;
            /** @description Premises: fields (with the versions you read) this write rests on. [] = rests on nothing (disables inference). */
            based_on?: components["schemas"]["Premise"][];
            /** @description true: the write rests on nothing (the same as based_on: []). */
            declare_no_premises?: boolean;
            /** @description Optional JSON object, at most 1 KiB, identifying this call (run id, tool call id); stored with the write. */
            invocation?: Record<string, never>;
            /** @description Optional: the record expires this many seconds after this write, unless it already expires later (the expiry is set or extended, never brought forward); at most the class's maxTtl. Without it the class ttl applies. */
            ttl_seconds?: number;
        };
        PutResponse: {
            /** @description The record, "<class>/<id>". */
            record: string;
            /** @description The field name. */
            field: string;
            /** @description The field's version (for an append field: its entry count). */
            version: number;
            /** @description Rises with every applied write to any field of the record. */
            record_version: number;
            /**
             * Format: date-time
             * @description When the record expires, after this write set or extended it (ttl_seconds).
             */
            expires_at?: string;
            /**
             * @description A dry run: what the write would answer now (the versions it would get); nothing was written.
             * @constant
             */
            dry_run?: true;
        };
        QueryResponse: {
            class: string;
            records: components["schemas"]["Record"][];
            /** @description More records remain: send this as after. */
            next_after?: string;
        };
        RateLimitedError: {
            /** @constant */
            error: "RATE_LIMITED";
            /** @description What happened and what to do, in one or two sentences (at most 1,024 characters). */
            message: string;
            /**
             * @description A dry run (`dry_run=true`): the rejection the write would get now; nothing was written.
             * @constant
             */
            dry_run?: true;
        };
        Ready: {
            /** @constant */
            status: "ready";
            /** @description What an operator should fix while the gateway serves, e.g. a primary without a synchronous standby (docs/ha.md); absent when there is nothing. */
            warnings?: string[];
        };
        Record: {
            /** @description The record, "<class>/<id>". */
            record: string;
            /** @description Rises with every applied write to any field of the record. */
            record_version: number;
            /** @description The fields that have a value, by name. */
            fields: {
                [key: string]: components["schemas"]["Field"];
            };
        };
        ScopeDeniedError: {
            /**
             * @description discriminator enum property added by openapi-typescript
             * @enum {string}
             */
            error: "SCOPE_DENIED";
            /** @description What happened and what to do, in one or two sentences (at most 1,024 characters). */
            message: string;
            /** @description The record, "<class>/<id>". */
            record?: string;
            /** @description The field name. */
            field: string;
            /** @description A transaction: which write (from 0) was refused; nothing was written. */
            index?: number;
            /**
             * @description A dry run (`dry_run=true`): the rejection the write would get now; nothing was written.
             * @constant
             */
            dry_run?: true;
        };
        StaleError: {
            /**
             * @description discriminator enum property added by openapi-typescript
             * @enum {string}
             */
            error: "STALE";
            /** @description What happened and what to do, in one or two sentences (at most 1,024 characters). */
            message: string;
            /** @description The field name. */
            field: string;
            your_version: number;
            current_version: number;
            /** @description null when your role may write but not read the field. */
            current_value: unknown;
            current_author: string | null;
            current_evidence: string | null;
            current_updated_at: string | null;
            /** @description Unified diff of the current and your value as pretty-printed JSON; a note when either is over 64 KiB or 500 lines; empty when your role may not read the field. */
            diff: string;
            /** @description A transaction: which write (from 0) was refused; nothing was written. */
            index?: number;
            /**
             * @description A dry run (`dry_run=true`): the rejection the write would get now; nothing was written.
             * @constant
             */
            dry_run?: true;
        };
        StalePremiseError: {
            /**
             * @description discriminator enum property added by openapi-typescript
             * @enum {string}
             */
            error: "STALE_PREMISE";
            /** @description What happened and what to do, in one or two sentences (at most 1,024 characters). */
            message: string;
            /** @description The record, "<class>/<id>". */
            record: string;
            /** @description The field name. */
            field: string;
            current_version: number;
            current_author: string | null;
            moved: {
                /** @description The field name. */
                field: string;
                your_version: number;
                current_version: number;
                current_author: string | null;
                current_evidence: string | null;
            }[];
            /** @description A transaction: which write (from 0) was refused; nothing was written. */
            index?: number;
            /**
             * @description A dry run (`dry_run=true`): the rejection the write would get now; nothing was written.
             * @constant
             */
            dry_run?: true;
        };
        StoredPremise: {
            /** @description The field name. */
            field: string;
            version: number;
            /** @constant */
            kind?: "fence";
            /**
             * @description The gateway worked this premise out from the writer's reads in its X-Svc-Scope.
             * @constant
             */
            inferred?: true;
        };
        TaskField: {
            /** @description The field's version (for an append field: its entry count). */
            version: number;
            /** @description The identity, "<provider>:<name>", e.g. "apikey:alice". */
            author?: string;
            /** @enum {string} */
            identity_strength?: "pod-bound" | "sa-bound" | "issuer-declared" | "shared-secret";
            evidence?: string;
            /** @description Premises on fields your role may read. */
            based_on?: components["schemas"]["StoredPremise"][];
            /** @description The JSON object the writer sent as `invocation`, unchanged. */
            invocation?: {
                [key: string]: unknown;
            };
            /**
             * Format: date-time
             * @description RFC 3339 with milliseconds and the server offset, e.g. 2026-11-22T11:30:00.123+00:00.
             */
            updated_at: string;
            /** @description The identity, "<provider>:<name>", e.g. "apikey:alice". */
            owner?: string;
            /**
             * Format: date-time
             * @description RFC 3339 with milliseconds and the server offset, e.g. 2026-11-22T11:30:00.123+00:00.
             */
            lease_expires_at?: string;
            /**
             * @description The lease expired and nobody has claimed the task since.
             * @constant
             */
            lease_lapsed?: true;
        };
        TransactionBody: {
            /** @description 1 to 64 writes, applied in order, all or none: {"op":"put","field","value","expected_version"}, {"op":"append","field","entry"}, {"op":"claim","field","lease_seconds","renew"}; each may carry the keys its operation takes (evidence, based_on, invocation). */
            writes: Record<string, never>[];
            /** @description Premises: fields (with the versions you read) this write rests on. [] = rests on nothing (disables inference). */
            based_on?: components["schemas"]["Premise"][];
            /** @description true: the write rests on nothing (the same as based_on: []). */
            declare_no_premises?: boolean;
            /** @description Why this value is right; required where the class or field demands it. */
            evidence?: string;
            /** @description Optional JSON object, at most 1 KiB, identifying this call (run id, tool call id); stored with the write. */
            invocation?: Record<string, never>;
            /** @description Optional: the record expires this many seconds after this write, unless it already expires later (the expiry is set or extended, never brought forward); at most the class's maxTtl. Without it the class ttl applies. */
            ttl_seconds?: number;
        };
        TransactionResponse: {
            /** @description The record, "<class>/<id>". */
            record: string;
            /** @description The one record version every write of the transaction got. */
            record_version: number;
            /** @description The id of the transaction, on each of its history rows. */
            transaction: string;
            /**
             * Format: date-time
             * @description When the record expires, after this write set or extended it (ttl_seconds).
             */
            expires_at?: string;
            /** @description Each write's answer in order, as the single write answers without record and record_version. */
            writes: {
                /** @enum {string} */
                op: "put" | "append" | "claim";
                /** @description The field name. */
                field: string;
                /** @description The field's version (for an append field: its entry count). */
                version?: number;
                seq?: number;
                /** @description The identity, "<provider>:<name>", e.g. "apikey:alice". */
                owner?: string;
                /**
                 * Format: date-time
                 * @description RFC 3339 with milliseconds and the server offset, e.g. 2026-11-22T11:30:00.123+00:00.
                 */
                lease_expires_at?: string;
                /** @description The identity, "<provider>:<name>", e.g. "apikey:alice". */
                took_over_from?: string;
            }[];
        };
        UnauthenticatedError: {
            /** @constant */
            error: "UNAUTHENTICATED";
            /** @description What happened and what to do, in one or two sentences (at most 1,024 characters). */
            message: string;
            /**
             * @description A dry run (`dry_run=true`): the rejection the write would get now; nothing was written.
             * @constant
             */
            dry_run?: true;
        };
        UnavailableError: {
            /** @constant */
            error: "UNAVAILABLE";
            /** @description What happened and what to do, in one or two sentences (at most 1,024 characters). */
            message: string;
            /**
             * @description Present when the database connection broke or stopped answering after the request was sent: a write may or may not have been applied; read before retrying it (docs/ha.md).
             * @constant
             */
            outcome?: "unknown";
            /**
             * @description A dry run (`dry_run=true`): the rejection the write would get now; nothing was written.
             * @constant
             */
            dry_run?: true;
        };
        UnknownFieldError: {
            /**
             * @description discriminator enum property added by openapi-typescript
             * @enum {string}
             */
            error: "UNKNOWN_FIELD";
            /** @description What happened and what to do, in one or two sentences (at most 1,024 characters). */
            message: string;
            /** @description The record, "<class>/<id>". */
            record?: string;
            class?: string;
            /** @description The field name. */
            field: string;
            /** @description A transaction: which write (from 0) was refused; nothing was written. */
            index?: number;
            /**
             * @description A dry run (`dry_run=true`): the rejection the write would get now; nothing was written.
             * @constant
             */
            dry_run?: true;
        };
        ValueField: {
            /** @description Any JSON value. */
            value: unknown;
            /** @description The field's version (for an append field: its entry count). */
            version: number;
            /** @description The identity, "<provider>:<name>", e.g. "apikey:alice". */
            author?: string;
            /** @enum {string} */
            identity_strength?: "pod-bound" | "sa-bound" | "issuer-declared" | "shared-secret";
            evidence?: string;
            /** @description Premises on fields your role may read. */
            based_on?: components["schemas"]["StoredPremise"][];
            /** @description The JSON object the writer sent as `invocation`, unchanged. */
            invocation?: {
                [key: string]: unknown;
            };
            /**
             * Format: date-time
             * @description RFC 3339 with milliseconds and the server offset, e.g. 2026-11-22T11:30:00.123+00:00.
             */
            updated_at: string;
        };
        WatchChange: {
            /** @description The history row of the change. */
            seq: number;
            /** @description The record, "<class>/<id>". */
            record: string;
            field: string;
            /** @enum {string} */
            op: "put" | "append" | "claim" | "release" | "takeover";
            /** @description The field's new version (an append: the entry's seq). */
            version?: number;
            record_version: number;
            /** @description The new value (an append: the new entry); absent for a task field. */
            value?: unknown;
            author: string;
            identity_strength?: string;
            evidence?: string;
            based_on?: components["schemas"]["StoredPremise"][];
            invocation?: {
                [key: string]: unknown;
            };
            /**
             * Format: date-time
             * @description RFC 3339 with milliseconds and the server offset, e.g. 2026-11-22T11:30:00.123+00:00.
             */
            created_at: string;
        };
        WatchClassEvent: {
            class: string;
        } | components["schemas"]["WatchChange"] | {
            /** @enum {string} */
            reason: "slow" | "shutdown" | "revoked" | "recreated" | "max_age" | "error";
            message: string;
        };
        WatchRecordEvent: {
            record: string;
            record_version: number;
        } | components["schemas"]["WatchChange"] | {
            /** @enum {string} */
            reason: "slow" | "shutdown" | "revoked" | "recreated" | "max_age" | "error";
            message: string;
        };
        WeakIdentityError: {
            /**
             * @description discriminator enum property added by openapi-typescript
             * @enum {string}
             */
            error: "WEAK_IDENTITY";
            /** @description What happened and what to do, in one or two sentences (at most 1,024 characters). */
            message: string;
            /** @description The record, "<class>/<id>". */
            record?: string;
            /** @description The field name. */
            field?: string;
            /** @enum {string} */
            required: "pod-bound" | "sa-bound" | "issuer-declared" | "shared-secret";
            /** @enum {string} */
            presented: "pod-bound" | "sa-bound" | "issuer-declared" | "shared-secret";
            /** @description A transaction: which write (from 0) was refused; nothing was written. */
            index?: number;
            /**
             * @description A dry run (`dry_run=true`): the rejection the write would get now; nothing was written.
             * @constant
             */
            dry_run?: true;
        };
    };
    responses: {
        /** @description METHOD_NOT_ALLOWED: the path was called with a method it does not take; Allow lists those it does. Answered before any credential check, to every method the path does not document. */
        MethodNotAllowed: {
            headers: {
                Allow: components["headers"]["Allow"];
                "X-Request-Id": components["headers"]["XRequestId"];
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["MethodNotAllowedError"];
            };
        };
        /** @description NOT_FOUND: no such endpoint. */
        NotFound: {
            headers: {
                "X-Request-Id": components["headers"]["XRequestId"];
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["NotFoundError"];
            };
        };
    };
    parameters: {
        /** @description Your run (e.g. a fresh UUID per agent run), 1 to 256 bytes of text: what you read in it becomes the premises of your later writes without based_on (15 minutes). A scope belongs to the first identity using it: another one gets IDENTITY_MISMATCH. */
        XSvcScope: string;
        /** @description Your key for this logical write (e.g. a fresh UUID), 1 to 255 printable ASCII characters (draft-ietf-httpapi-idempotency-key-header). The answer (2xx or 4xx) is stored with the write in one transaction and kept 24 h (--idempotency-ttl): a retry with the same key and request (operation, record, field, body) gets it byte for byte with `Idempotent-Replayed: true` and writes nothing. The same key with another request: 422 IDEMPOTENCY_KEY_REUSED; while the first still runs: 409 IDEMPOTENCY_KEY_IN_USE with Retry-After. Keys are per identity. A 5xx is not stored: retry with the same key. */
        IdempotencyKey: string;
        /** @description true: every check runs against the current state and the answer is what the write would answer now (the versions it would get, or the exact rejection) with "dry_run": true; nothing is written (no history row, no version, no idempotency key, no metrics of applied writes). */
        DryRun: boolean;
        /** @description Your id for the request, echoed back; one that does not match the pattern is replaced by a fresh one (never refused). */
        XRequestId: string;
    };
    requestBodies: never;
    headers: {
        /** @description The request id: the one sent in X-Request-Id when it is a sane token, else a fresh one. In the access log and in INTERNAL bodies. */
        XRequestId: string;
        /** @description Seconds to wait before retrying; sent with every 503. */
        RetryAfter: number;
        /** @description How to authenticate (RFC 6750 §3): `Bearer realm="kslate"`, with `error="invalid_token"` when a bearer token was sent, and, when the gateway names an authorization server (--identity oidc), `resource_metadata` with the URL of its protected resource metadata (RFC 9728). Sent with every 401. */
        WWWAuthenticate: string;
        /** @description The methods the path takes. */
        Allow: string;
        /** @description How long the answer may be cached. */
        CacheControl: string;
        /** @description A validator of this answer; send it in If-None-Match to get 304 while it has not changed. */
        ETag: string;
        /** @description The database's WAL position at or after this write's commit (e.g. 16/B374D848). Send it back as X-Kslate-Min-Lsn on a read to see this write even when a standby serves the read (docs/ha.md, Reads from standbys). Also on a refusal that recorded a history row (STALE, STALE_PREMISE, HELD). */
        XKslateLsn: string;
        /** @description The MCP session opened by initialize on /mcp/session: send it on every later request of the session (docs/mcp.md, Subscriptions). */
        McpSessionId: string;
    };
    pathItems: never;
}
export type $defs = Record<string, never>;
export interface operations {
    classes: {
        parameters: {
            query?: never;
            header?: {
                /** @description Your id for the request, echoed back; one that does not match the pattern is replaced by a fresh one (never refused). */
                "X-Request-Id"?: components["parameters"]["XRequestId"];
            };
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The classes, by name; a deleted one shows gone: true. */
            200: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ClassesResponse"];
                };
            };
            /** @description MALFORMED: bad JSON or UTF-8, a missing, unknown or repeated key or parameter, a wrong type or enum, a bad id or cursor, a body over 4 MiB. */
            400: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["MalformedError"];
                };
            };
            /** @description UNAUTHENTICATED: no credential, or one no identity provider accepts. */
            401: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    "WWW-Authenticate": components["headers"]["WWWAuthenticate"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["UnauthenticatedError"];
                };
            };
            405: components["responses"]["MethodNotAllowed"];
            /** @description RATE_LIMITED: too many rejected credentials from your address; wait a few seconds. */
            429: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["RateLimitedError"];
                };
            };
            /** @description INTERNAL: a fault; quote request_id to the operator. */
            500: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["InternalError"];
                };
            };
            /** @description UNAVAILABLE: the database is unreachable, slow (--db-timeout) or being migrated, or an identity provider cannot judge right now; retry. */
            503: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    "Retry-After": components["headers"]["RetryAfter"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["UnavailableError"];
                };
            };
        };
    };
    class: {
        parameters: {
            query?: never;
            header?: {
                /** @description Your id for the request, echoed back; one that does not match the pattern is replaced by a fresh one (never refused). */
                "X-Request-Id"?: components["parameters"]["XRequestId"];
            };
            path: {
                /** @description The class name. */
                name: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The class definition. */
            200: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ClassResponse"];
                };
            };
            /** @description MALFORMED: bad JSON or UTF-8, a missing, unknown or repeated key or parameter, a wrong type or enum, a bad id or cursor, a body over 4 MiB. */
            400: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["MalformedError"];
                };
            };
            /** @description UNAUTHENTICATED: no credential, or one no identity provider accepts. */
            401: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    "WWW-Authenticate": components["headers"]["WWWAuthenticate"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["UnauthenticatedError"];
                };
            };
            /** @description NO_ROLE: you have no role in the class (nothing else about it is revealed). */
            403: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["NoRoleError"];
                };
            };
            /** @description NOT_FOUND: the class or record does not exist. */
            404: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["NotFoundError"];
                };
            };
            405: components["responses"]["MethodNotAllowed"];
            /** @description RATE_LIMITED: too many rejected credentials from your address; wait a few seconds. */
            429: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["RateLimitedError"];
                };
            };
            /** @description INTERNAL: a fault; quote request_id to the operator. */
            500: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["InternalError"];
                };
            };
            /** @description UNAVAILABLE: the database is unreachable, slow (--db-timeout) or being migrated, or an identity provider cannot judge right now; retry. */
            503: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    "Retry-After": components["headers"]["RetryAfter"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["UnavailableError"];
                };
            };
        };
    };
    history: {
        parameters: {
            query?: {
                /** @description Only the rows of this field (it must be one your role may read). */
                field?: string;
                /** @description Rows per page, newest first (default 1000). */
                limit?: number;
                /** @description The next_before of the previous page (bound to this record and `field`). */
                before?: string;
            };
            header?: {
                /** @description Your run (e.g. a fresh UUID per agent run), 1 to 256 bytes of text: what you read in it becomes the premises of your later writes without based_on (15 minutes). A scope belongs to the first identity using it: another one gets IDENTITY_MISMATCH. */
                "X-Svc-Scope"?: components["parameters"]["XSvcScope"];
                /** @description Read your own writes: the X-Kslate-Lsn of a write. A standby serves the read only once it has replayed that far; else the primary does. Malformed: 400 MALFORMED. */
                "X-Kslate-Min-Lsn"?: string;
                /** @description Your id for the request, echoed back; one that does not match the pattern is replaced by a fresh one (never refused). */
                "X-Request-Id"?: components["parameters"]["XRequestId"];
            };
            path: {
                /** @description The class name. */
                class: string;
                /** @description The record id: at most 256 bytes, no "/", matching the class idPattern. */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description A page of history rows. */
            200: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["HistoryResponse"];
                };
            };
            /** @description MALFORMED: bad JSON or UTF-8, a missing, unknown or repeated key or parameter, a wrong type or enum, a bad id or cursor, a body over 4 MiB. */
            400: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["MalformedError"];
                };
            };
            /** @description UNAUTHENTICATED: no credential, or one no identity provider accepts. */
            401: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    "WWW-Authenticate": components["headers"]["WWWAuthenticate"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["UnauthenticatedError"];
                };
            };
            /** @description NO_ROLE: you have no role in the class (nothing else about it is revealed). SCOPE_DENIED: your role may not read or write that field. IDENTITY_MISMATCH: your X-Svc-Scope is in use by another identity. */
            403: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["NoRoleError"] | components["schemas"]["ScopeDeniedError"] | components["schemas"]["IdentityMismatchError"];
                };
            };
            /** @description NOT_FOUND: the class or record does not exist. */
            404: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["NotFoundError"];
                };
            };
            405: components["responses"]["MethodNotAllowed"];
            /** @description UNKNOWN_FIELD: the class has no such field. */
            422: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["UnknownFieldError"];
                };
            };
            /** @description RATE_LIMITED: too many rejected credentials from your address; wait a few seconds. */
            429: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["RateLimitedError"];
                };
            };
            /** @description INTERNAL: a fault; quote request_id to the operator. */
            500: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["InternalError"];
                };
            };
            /** @description UNAVAILABLE: the database is unreachable, slow (--db-timeout) or being migrated, or an identity provider cannot judge right now; retry. */
            503: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    "Retry-After": components["headers"]["RetryAfter"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["UnavailableError"];
                };
            };
        };
    };
    get: {
        parameters: {
            query?: {
                /** @description Only these fields (default: every field your role may read). */
                fields?: string[];
                /** @description At most this many entries per append field (the newest). */
                entries_limit?: number;
                /** @description Continue an append field whose entries did not all fit: its next_entries_before, with fields = [that field]. */
                entries_before?: string;
            };
            header?: {
                /** @description Your run (e.g. a fresh UUID per agent run), 1 to 256 bytes of text: what you read in it becomes the premises of your later writes without based_on (15 minutes). A scope belongs to the first identity using it: another one gets IDENTITY_MISMATCH. */
                "X-Svc-Scope"?: components["parameters"]["XSvcScope"];
                /** @description Read your own writes: the X-Kslate-Lsn of a write. A standby serves the read only once it has replayed that far; else the primary does. Malformed: 400 MALFORMED. */
                "X-Kslate-Min-Lsn"?: string;
                /** @description Your id for the request, echoed back; one that does not match the pattern is replaced by a fresh one (never refused). */
                "X-Request-Id"?: components["parameters"]["XRequestId"];
            };
            path: {
                /** @description The class name. */
                class: string;
                /** @description The record id: at most 256 bytes, no "/", matching the class idPattern. */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The record. */
            200: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["GetResponse"];
                };
            };
            /** @description MALFORMED: bad JSON or UTF-8, a missing, unknown or repeated key or parameter, a wrong type or enum, a bad id or cursor, a body over 4 MiB. */
            400: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["MalformedError"];
                };
            };
            /** @description UNAUTHENTICATED: no credential, or one no identity provider accepts. */
            401: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    "WWW-Authenticate": components["headers"]["WWWAuthenticate"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["UnauthenticatedError"];
                };
            };
            /** @description NO_ROLE: you have no role in the class (nothing else about it is revealed). SCOPE_DENIED: your role may not read or write that field. IDENTITY_MISMATCH: your X-Svc-Scope is in use by another identity. */
            403: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["NoRoleError"] | components["schemas"]["ScopeDeniedError"] | components["schemas"]["IdentityMismatchError"];
                };
            };
            /** @description NOT_FOUND: the class or record does not exist. */
            404: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["NotFoundError"];
                };
            };
            405: components["responses"]["MethodNotAllowed"];
            /** @description UNKNOWN_FIELD: the class has no such field. */
            422: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["UnknownFieldError"];
                };
            };
            /** @description RATE_LIMITED: too many rejected credentials from your address; wait a few seconds. */
            429: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["RateLimitedError"];
                };
            };
            /** @description INTERNAL: a fault; quote request_id to the operator. */
            500: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["InternalError"];
                };
            };
            /** @description UNAVAILABLE: the database is unreachable, slow (--db-timeout) or being migrated, or an identity provider cannot judge right now; retry. */
            503: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    "Retry-After": components["headers"]["RetryAfter"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["UnavailableError"];
                };
            };
        };
    };
    query: {
        parameters: {
            query?: {
                /** @description {<field>: <value>}: every filter must match. Over HTTP each key is a query parameter of its own (?status=open&severity=1), so this parameter has no name of its own. */
                filters?: {
                    [key: string]: string;
                };
                /** @description Records per page (default 100). */
                limit?: number;
                /** @description The next_after of the previous page. */
                after?: string;
            };
            header?: {
                /** @description Your run (e.g. a fresh UUID per agent run), 1 to 256 bytes of text: what you read in it becomes the premises of your later writes without based_on (15 minutes). A scope belongs to the first identity using it: another one gets IDENTITY_MISMATCH. */
                "X-Svc-Scope"?: components["parameters"]["XSvcScope"];
                /** @description Read your own writes: the X-Kslate-Lsn of a write. A standby serves the read only once it has replayed that far; else the primary does. Malformed: 400 MALFORMED. */
                "X-Kslate-Min-Lsn"?: string;
                /** @description Your id for the request, echoed back; one that does not match the pattern is replaced by a fresh one (never refused). */
                "X-Request-Id"?: components["parameters"]["XRequestId"];
            };
            path: {
                /** @description The class name. */
                class: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description A page of matching records. */
            200: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["QueryResponse"];
                };
            };
            /** @description MALFORMED: bad JSON or UTF-8, a missing, unknown or repeated key or parameter, a wrong type or enum, a bad id or cursor, a body over 4 MiB. */
            400: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["MalformedError"];
                };
            };
            /** @description UNAUTHENTICATED: no credential, or one no identity provider accepts. */
            401: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    "WWW-Authenticate": components["headers"]["WWWAuthenticate"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["UnauthenticatedError"];
                };
            };
            /** @description NO_ROLE: you have no role in the class (nothing else about it is revealed). SCOPE_DENIED: your role may not read or write that field. IDENTITY_MISMATCH: your X-Svc-Scope is in use by another identity. */
            403: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["NoRoleError"] | components["schemas"]["ScopeDeniedError"] | components["schemas"]["IdentityMismatchError"];
                };
            };
            /** @description NOT_FOUND: the class or record does not exist. */
            404: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["NotFoundError"];
                };
            };
            405: components["responses"]["MethodNotAllowed"];
            /** @description UNKNOWN_FIELD: the class has no such field. */
            422: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["UnknownFieldError"];
                };
            };
            /** @description RATE_LIMITED: too many rejected credentials from your address; wait a few seconds. */
            429: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["RateLimitedError"];
                };
            };
            /** @description INTERNAL: a fault; quote request_id to the operator. */
            500: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["InternalError"];
                };
            };
            /** @description UNAVAILABLE: the database is unreachable, slow (--db-timeout) or being migrated, or an identity provider cannot judge right now; retry. */
            503: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    "Retry-After": components["headers"]["RetryAfter"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["UnavailableError"];
                };
            };
        };
    };
    checkpointLoad: {
        parameters: {
            query?: {
                /** @description load: which of your roles (only when you hold several). */
                role?: string;
            };
            header?: {
                /** @description Your run (e.g. a fresh UUID per agent run), 1 to 256 bytes of text: what you read in it becomes the premises of your later writes without based_on (15 minutes). A scope belongs to the first identity using it: another one gets IDENTITY_MISMATCH. */
                "X-Svc-Scope"?: components["parameters"]["XSvcScope"];
                /** @description Read your own writes: the X-Kslate-Lsn of a write. A standby serves the read only once it has replayed that far; else the primary does. Malformed: 400 MALFORMED. */
                "X-Kslate-Min-Lsn"?: string;
                /** @description Your id for the request, echoed back; one that does not match the pattern is replaced by a fresh one (never refused). */
                "X-Request-Id"?: components["parameters"]["XRequestId"];
            };
            path: {
                /** @description The class name. */
                class: string;
                /** @description The record id: at most 256 bytes, no "/", matching the class idPattern. */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The checkpoint (document null when none was saved). */
            200: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["CheckpointLoadResponse"];
                };
            };
            /** @description MALFORMED: bad JSON or UTF-8, a missing, unknown or repeated key or parameter, a wrong type or enum, a bad id or cursor, a body over 4 MiB. */
            400: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["MalformedError"];
                };
            };
            /** @description UNAUTHENTICATED: no credential, or one no identity provider accepts. */
            401: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    "WWW-Authenticate": components["headers"]["WWWAuthenticate"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["UnauthenticatedError"];
                };
            };
            /** @description NO_ROLE: you have no role in the class (nothing else about it is revealed). IDENTITY_MISMATCH: your X-Svc-Scope is in use by another identity. */
            403: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["NoRoleError"] | components["schemas"]["IdentityMismatchError"];
                };
            };
            /** @description NOT_FOUND: the class or record does not exist. */
            404: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["NotFoundError"];
                };
            };
            405: components["responses"]["MethodNotAllowed"];
            /** @description RATE_LIMITED: too many rejected credentials from your address; wait a few seconds. */
            429: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["RateLimitedError"];
                };
            };
            /** @description INTERNAL: a fault; quote request_id to the operator. */
            500: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["InternalError"];
                };
            };
            /** @description UNAVAILABLE: the database is unreachable, slow (--db-timeout) or being migrated, or an identity provider cannot judge right now; retry. */
            503: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    "Retry-After": components["headers"]["RetryAfter"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["UnavailableError"];
                };
            };
        };
    };
    checkpointSave: {
        parameters: {
            query?: {
                /** @description true: every check runs against the current state and the answer is what the write would answer now (the versions it would get, or the exact rejection) with "dry_run": true; nothing is written (no history row, no version, no idempotency key, no metrics of applied writes). */
                dry_run?: components["parameters"]["DryRun"];
            };
            header?: {
                /** @description Your run (e.g. a fresh UUID per agent run), 1 to 256 bytes of text: what you read in it becomes the premises of your later writes without based_on (15 minutes). A scope belongs to the first identity using it: another one gets IDENTITY_MISMATCH. */
                "X-Svc-Scope"?: components["parameters"]["XSvcScope"];
                /** @description Your key for this logical write (e.g. a fresh UUID), 1 to 255 printable ASCII characters (draft-ietf-httpapi-idempotency-key-header). The answer (2xx or 4xx) is stored with the write in one transaction and kept 24 h (--idempotency-ttl): a retry with the same key and request (operation, record, field, body) gets it byte for byte with `Idempotent-Replayed: true` and writes nothing. The same key with another request: 422 IDEMPOTENCY_KEY_REUSED; while the first still runs: 409 IDEMPOTENCY_KEY_IN_USE with Retry-After. Keys are per identity. A 5xx is not stored: retry with the same key. */
                "Idempotency-Key"?: components["parameters"]["IdempotencyKey"];
                /** @description Your id for the request, echoed back; one that does not match the pattern is replaced by a fresh one (never refused). */
                "X-Request-Id"?: components["parameters"]["XRequestId"];
            };
            path: {
                /** @description The class name. */
                class: string;
                /** @description The record id: at most 256 bytes, no "/", matching the class idPattern. */
                id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["CheckpointSaveBody"];
            };
        };
        responses: {
            /** @description Saved. */
            200: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    "X-Kslate-Lsn": components["headers"]["XKslateLsn"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["CheckpointSaveResponse"];
                };
            };
            /** @description MALFORMED: bad JSON or UTF-8, a missing, unknown or repeated key or parameter, a wrong type or enum, a bad id or cursor, a body over 4 MiB. */
            400: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["MalformedError"];
                };
            };
            /** @description UNAUTHENTICATED: no credential, or one no identity provider accepts. */
            401: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    "WWW-Authenticate": components["headers"]["WWWAuthenticate"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["UnauthenticatedError"];
                };
            };
            /** @description NO_ROLE: you have no role in the class (nothing else about it is revealed). WEAK_IDENTITY: your credential is below the class or field floor (required, presented). IDENTITY_MISMATCH: your X-Svc-Scope is in use by another identity. */
            403: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["NoRoleError"] | components["schemas"]["WeakIdentityError"] | components["schemas"]["IdentityMismatchError"];
                };
            };
            /** @description NOT_FOUND: the class or record does not exist. */
            404: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["NotFoundError"];
                };
            };
            405: components["responses"]["MethodNotAllowed"];
            /** @description IDEMPOTENCY_KEY_IN_USE: a request with this Idempotency-Key is still running; retry with the same key after Retry-After. */
            409: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["IdempotencyKeyInUseError"];
                };
            };
            /** @description CLASS_GONE: the class was deleted; its records can be read, not written. */
            410: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ClassGoneError"];
                };
            };
            /** @description INVALID_CHECKPOINT: the checkpoint document is not an object, over 64 KiB or lacks a section, or status resolved needs a role's checkpoint first. IDEMPOTENCY_KEY_REUSED: the Idempotency-Key was used for a different request (operation, record, field or body); use a fresh key. */
            422: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["InvalidCheckpointError"] | components["schemas"]["IdempotencyKeyReusedError"];
                };
            };
            /** @description RATE_LIMITED: too many rejected credentials from your address; wait a few seconds. */
            429: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["RateLimitedError"];
                };
            };
            /** @description INTERNAL: a fault; quote request_id to the operator. */
            500: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["InternalError"];
                };
            };
            /** @description UNAVAILABLE: the database is unreachable, slow (--db-timeout) or being migrated, or an identity provider cannot judge right now; retry. */
            503: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    "Retry-After": components["headers"]["RetryAfter"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["UnavailableError"];
                };
            };
        };
    };
    claim: {
        parameters: {
            query?: {
                /** @description true: every check runs against the current state and the answer is what the write would answer now (the versions it would get, or the exact rejection) with "dry_run": true; nothing is written (no history row, no version, no idempotency key, no metrics of applied writes). */
                dry_run?: components["parameters"]["DryRun"];
            };
            header?: {
                /** @description Your run (e.g. a fresh UUID per agent run), 1 to 256 bytes of text: what you read in it becomes the premises of your later writes without based_on (15 minutes). A scope belongs to the first identity using it: another one gets IDENTITY_MISMATCH. */
                "X-Svc-Scope"?: components["parameters"]["XSvcScope"];
                /** @description Your key for this logical write (e.g. a fresh UUID), 1 to 255 printable ASCII characters (draft-ietf-httpapi-idempotency-key-header). The answer (2xx or 4xx) is stored with the write in one transaction and kept 24 h (--idempotency-ttl): a retry with the same key and request (operation, record, field, body) gets it byte for byte with `Idempotent-Replayed: true` and writes nothing. The same key with another request: 422 IDEMPOTENCY_KEY_REUSED; while the first still runs: 409 IDEMPOTENCY_KEY_IN_USE with Retry-After. Keys are per identity. A 5xx is not stored: retry with the same key. */
                "Idempotency-Key"?: components["parameters"]["IdempotencyKey"];
                /** @description Your id for the request, echoed back; one that does not match the pattern is replaced by a fresh one (never refused). */
                "X-Request-Id"?: components["parameters"]["XRequestId"];
            };
            path: {
                /** @description The class name. */
                class: string;
                /** @description The record id: at most 256 bytes, no "/", matching the class idPattern. */
                id: string;
                /** @description The field name, as the class defines it. */
                field: string;
            };
            cookie?: never;
        };
        requestBody?: {
            content: {
                "application/json": components["schemas"]["ClaimBody"];
            };
        };
        responses: {
            /** @description The lease after the claim (no owner after a release). */
            200: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    "X-Kslate-Lsn": components["headers"]["XKslateLsn"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ClaimResponse"];
                };
            };
            /** @description The lease; the write created the record. */
            201: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    "X-Kslate-Lsn": components["headers"]["XKslateLsn"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ClaimResponse"];
                };
            };
            /** @description MALFORMED: bad JSON or UTF-8, a missing, unknown or repeated key or parameter, a wrong type or enum, a bad id or cursor, a body over 4 MiB. */
            400: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["MalformedError"];
                };
            };
            /** @description UNAUTHENTICATED: no credential, or one no identity provider accepts. */
            401: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    "WWW-Authenticate": components["headers"]["WWWAuthenticate"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["UnauthenticatedError"];
                };
            };
            /** @description NO_ROLE: you have no role in the class (nothing else about it is revealed). SCOPE_DENIED: your role may not read or write that field. WEAK_IDENTITY: your credential is below the class or field floor (required, presented). IDENTITY_MISMATCH: your X-Svc-Scope is in use by another identity. */
            403: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["NoRoleError"] | components["schemas"]["ScopeDeniedError"] | components["schemas"]["WeakIdentityError"] | components["schemas"]["IdentityMismatchError"];
                };
            };
            /** @description NOT_FOUND: the class or record does not exist. */
            404: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["NotFoundError"];
                };
            };
            405: components["responses"]["MethodNotAllowed"];
            /** @description HELD: another identity holds the lease (owner, lease_expires_at). IDEMPOTENCY_KEY_IN_USE: a request with this Idempotency-Key is still running; retry with the same key after Retry-After. */
            409: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["HeldError"] | components["schemas"]["IdempotencyKeyInUseError"];
                };
            };
            /** @description CLASS_GONE: the class was deleted; its records can be read, not written. */
            410: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ClassGoneError"];
                };
            };
            /** @description UNKNOWN_FIELD: the class has no such field. NOT_TASK_FIELD: claim on a field that is not a task field. IDEMPOTENCY_KEY_REUSED: the Idempotency-Key was used for a different request (operation, record, field or body); use a fresh key. */
            422: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["UnknownFieldError"] | components["schemas"]["NotTaskFieldError"] | components["schemas"]["IdempotencyKeyReusedError"];
                };
            };
            /** @description RATE_LIMITED: too many rejected credentials from your address; wait a few seconds. */
            429: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["RateLimitedError"];
                };
            };
            /** @description INTERNAL: a fault; quote request_id to the operator. */
            500: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["InternalError"];
                };
            };
            /** @description UNAVAILABLE: the database is unreachable, slow (--db-timeout) or being migrated, or an identity provider cannot judge right now; retry. */
            503: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    "Retry-After": components["headers"]["RetryAfter"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["UnavailableError"];
                };
            };
        };
    };
    append: {
        parameters: {
            query?: {
                /** @description true: every check runs against the current state and the answer is what the write would answer now (the versions it would get, or the exact rejection) with "dry_run": true; nothing is written (no history row, no version, no idempotency key, no metrics of applied writes). */
                dry_run?: components["parameters"]["DryRun"];
            };
            header?: {
                /** @description Your run (e.g. a fresh UUID per agent run), 1 to 256 bytes of text: what you read in it becomes the premises of your later writes without based_on (15 minutes). A scope belongs to the first identity using it: another one gets IDENTITY_MISMATCH. */
                "X-Svc-Scope"?: components["parameters"]["XSvcScope"];
                /** @description Your key for this logical write (e.g. a fresh UUID), 1 to 255 printable ASCII characters (draft-ietf-httpapi-idempotency-key-header). The answer (2xx or 4xx) is stored with the write in one transaction and kept 24 h (--idempotency-ttl): a retry with the same key and request (operation, record, field, body) gets it byte for byte with `Idempotent-Replayed: true` and writes nothing. The same key with another request: 422 IDEMPOTENCY_KEY_REUSED; while the first still runs: 409 IDEMPOTENCY_KEY_IN_USE with Retry-After. Keys are per identity. A 5xx is not stored: retry with the same key. */
                "Idempotency-Key"?: components["parameters"]["IdempotencyKey"];
                /** @description Your id for the request, echoed back; one that does not match the pattern is replaced by a fresh one (never refused). */
                "X-Request-Id"?: components["parameters"]["XRequestId"];
            };
            path: {
                /** @description The class name. */
                class: string;
                /** @description The record id: at most 256 bytes, no "/", matching the class idPattern. */
                id: string;
                /** @description The field name, as the class defines it. */
                field: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["AppendBody"];
            };
        };
        responses: {
            /** @description The entry was added. */
            200: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    "X-Kslate-Lsn": components["headers"]["XKslateLsn"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["AppendResponse"];
                };
            };
            /** @description The entry was added; the write created the record. */
            201: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    "X-Kslate-Lsn": components["headers"]["XKslateLsn"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["AppendResponse"];
                };
            };
            /** @description MALFORMED: bad JSON or UTF-8, a missing, unknown or repeated key or parameter, a wrong type or enum, a bad id or cursor, a body over 4 MiB. */
            400: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["MalformedError"];
                };
            };
            /** @description UNAUTHENTICATED: no credential, or one no identity provider accepts. */
            401: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    "WWW-Authenticate": components["headers"]["WWWAuthenticate"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["UnauthenticatedError"];
                };
            };
            /** @description NO_ROLE: you have no role in the class (nothing else about it is revealed). SCOPE_DENIED: your role may not read or write that field. WEAK_IDENTITY: your credential is below the class or field floor (required, presented). IDENTITY_MISMATCH: your X-Svc-Scope is in use by another identity. */
            403: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["NoRoleError"] | components["schemas"]["ScopeDeniedError"] | components["schemas"]["WeakIdentityError"] | components["schemas"]["IdentityMismatchError"];
                };
            };
            /** @description NOT_FOUND: the class or record does not exist. */
            404: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["NotFoundError"];
                };
            };
            405: components["responses"]["MethodNotAllowed"];
            /** @description STALE_PREMISE: a premise moved (moved lists them); re-read and decide again. IDEMPOTENCY_KEY_IN_USE: a request with this Idempotency-Key is still running; retry with the same key after Retry-After. */
            409: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["StalePremiseError"] | components["schemas"]["IdempotencyKeyInUseError"];
                };
            };
            /** @description CLASS_GONE: the class was deleted; its records can be read, not written. */
            410: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ClassGoneError"];
                };
            };
            /** @description UNKNOWN_FIELD: the class has no such field. NOT_APPEND_FIELD: append on a field that is not an append field. EVIDENCE_REQUIRED: the class or field wants evidence. IDEMPOTENCY_KEY_REUSED: the Idempotency-Key was used for a different request (operation, record, field or body); use a fresh key. */
            422: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["UnknownFieldError"] | components["schemas"]["NotAppendFieldError"] | components["schemas"]["EvidenceRequiredError"] | components["schemas"]["IdempotencyKeyReusedError"];
                };
            };
            /** @description RATE_LIMITED: too many rejected credentials from your address; wait a few seconds. */
            429: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["RateLimitedError"];
                };
            };
            /** @description INTERNAL: a fault; quote request_id to the operator. */
            500: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["InternalError"];
                };
            };
            /** @description UNAVAILABLE: the database is unreachable, slow (--db-timeout) or being migrated, or an identity provider cannot judge right now; retry. */
            503: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    "Retry-After": components["headers"]["RetryAfter"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["UnavailableError"];
                };
            };
        };
    };
    put: {
        parameters: {
            query?: {
                /** @description true: every check runs against the current state and the answer is what the write would answer now (the versions it would get, or the exact rejection) with "dry_run": true; nothing is written (no history row, no version, no idempotency key, no metrics of applied writes). */
                dry_run?: components["parameters"]["DryRun"];
            };
            header?: {
                /** @description Your run (e.g. a fresh UUID per agent run), 1 to 256 bytes of text: what you read in it becomes the premises of your later writes without based_on (15 minutes). A scope belongs to the first identity using it: another one gets IDENTITY_MISMATCH. */
                "X-Svc-Scope"?: components["parameters"]["XSvcScope"];
                /** @description Your key for this logical write (e.g. a fresh UUID), 1 to 255 printable ASCII characters (draft-ietf-httpapi-idempotency-key-header). The answer (2xx or 4xx) is stored with the write in one transaction and kept 24 h (--idempotency-ttl): a retry with the same key and request (operation, record, field, body) gets it byte for byte with `Idempotent-Replayed: true` and writes nothing. The same key with another request: 422 IDEMPOTENCY_KEY_REUSED; while the first still runs: 409 IDEMPOTENCY_KEY_IN_USE with Retry-After. Keys are per identity. A 5xx is not stored: retry with the same key. */
                "Idempotency-Key"?: components["parameters"]["IdempotencyKey"];
                /** @description Your id for the request, echoed back; one that does not match the pattern is replaced by a fresh one (never refused). */
                "X-Request-Id"?: components["parameters"]["XRequestId"];
            };
            path: {
                /** @description The class name. */
                class: string;
                /** @description The record id: at most 256 bytes, no "/", matching the class idPattern. */
                id: string;
                /** @description The field name, as the class defines it. */
                field: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["PutBody"];
            };
        };
        responses: {
            /** @description Written. */
            200: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    "X-Kslate-Lsn": components["headers"]["XKslateLsn"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["PutResponse"];
                };
            };
            /** @description Written; the write created the record. */
            201: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    "X-Kslate-Lsn": components["headers"]["XKslateLsn"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["PutResponse"];
                };
            };
            /** @description MALFORMED: bad JSON or UTF-8, a missing, unknown or repeated key or parameter, a wrong type or enum, a bad id or cursor, a body over 4 MiB. */
            400: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["MalformedError"];
                };
            };
            /** @description UNAUTHENTICATED: no credential, or one no identity provider accepts. */
            401: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    "WWW-Authenticate": components["headers"]["WWWAuthenticate"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["UnauthenticatedError"];
                };
            };
            /** @description NO_ROLE: you have no role in the class (nothing else about it is revealed). SCOPE_DENIED: your role may not read or write that field. WEAK_IDENTITY: your credential is below the class or field floor (required, presented). IDENTITY_MISMATCH: your X-Svc-Scope is in use by another identity. */
            403: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["NoRoleError"] | components["schemas"]["ScopeDeniedError"] | components["schemas"]["WeakIdentityError"] | components["schemas"]["IdentityMismatchError"];
                };
            };
            /** @description NOT_FOUND: the class or record does not exist. */
            404: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["NotFoundError"];
                };
            };
            405: components["responses"]["MethodNotAllowed"];
            /** @description STALE: the field moved since the version you read; re-read and decide again. STALE_PREMISE: a premise moved (moved lists them); re-read and decide again. IDEMPOTENCY_KEY_IN_USE: a request with this Idempotency-Key is still running; retry with the same key after Retry-After. */
            409: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["StaleError"] | components["schemas"]["StalePremiseError"] | components["schemas"]["IdempotencyKeyInUseError"];
                };
            };
            /** @description CLASS_GONE: the class was deleted; its records can be read, not written. */
            410: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ClassGoneError"];
                };
            };
            /** @description UNKNOWN_FIELD: the class has no such field. NOT_WRITABLE: put on an append or task field. EVIDENCE_REQUIRED: the class or field wants evidence. INVALID_CHECKPOINT: the checkpoint document is not an object, over 64 KiB or lacks a section, or status resolved needs a role's checkpoint first. IDEMPOTENCY_KEY_REUSED: the Idempotency-Key was used for a different request (operation, record, field or body); use a fresh key. */
            422: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["UnknownFieldError"] | components["schemas"]["NotWritableError"] | components["schemas"]["EvidenceRequiredError"] | components["schemas"]["InvalidCheckpointError"] | components["schemas"]["IdempotencyKeyReusedError"];
                };
            };
            /** @description RATE_LIMITED: too many rejected credentials from your address; wait a few seconds. */
            429: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["RateLimitedError"];
                };
            };
            /** @description INTERNAL: a fault; quote request_id to the operator. */
            500: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["InternalError"];
                };
            };
            /** @description UNAVAILABLE: the database is unreachable, slow (--db-timeout) or being migrated, or an identity provider cannot judge right now; retry. */
            503: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    "Retry-After": components["headers"]["RetryAfter"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["UnavailableError"];
                };
            };
        };
    };
    transaction: {
        parameters: {
            query?: {
                /** @description true: every check runs against the current state and the answer is what the write would answer now (the versions it would get, or the exact rejection) with "dry_run": true; nothing is written (no history row, no version, no idempotency key, no metrics of applied writes). */
                dry_run?: components["parameters"]["DryRun"];
            };
            header?: {
                /** @description Your run (e.g. a fresh UUID per agent run), 1 to 256 bytes of text: what you read in it becomes the premises of your later writes without based_on (15 minutes). A scope belongs to the first identity using it: another one gets IDENTITY_MISMATCH. */
                "X-Svc-Scope"?: components["parameters"]["XSvcScope"];
                /** @description Your key for this logical write (e.g. a fresh UUID), 1 to 255 printable ASCII characters (draft-ietf-httpapi-idempotency-key-header). The answer (2xx or 4xx) is stored with the write in one transaction and kept 24 h (--idempotency-ttl): a retry with the same key and request (operation, record, field, body) gets it byte for byte with `Idempotent-Replayed: true` and writes nothing. The same key with another request: 422 IDEMPOTENCY_KEY_REUSED; while the first still runs: 409 IDEMPOTENCY_KEY_IN_USE with Retry-After. Keys are per identity. A 5xx is not stored: retry with the same key. */
                "Idempotency-Key"?: components["parameters"]["IdempotencyKey"];
                /** @description Your id for the request, echoed back; one that does not match the pattern is replaced by a fresh one (never refused). */
                "X-Request-Id"?: components["parameters"]["XRequestId"];
            };
            path: {
                /** @description The class name. */
                class: string;
                /** @description The record id: at most 256 bytes, no "/", matching the class idPattern. */
                id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["TransactionBody"];
            };
        };
        responses: {
            /** @description Every write was applied. */
            200: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["TransactionResponse"];
                };
            };
            /** @description Every write was applied; the write created the record. */
            201: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["TransactionResponse"];
                };
            };
            /** @description MALFORMED: bad JSON or UTF-8, a missing, unknown or repeated key or parameter, a wrong type or enum, a bad id or cursor, a body over 4 MiB. */
            400: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["MalformedError"];
                };
            };
            /** @description UNAUTHENTICATED: no credential, or one no identity provider accepts. */
            401: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    "WWW-Authenticate": components["headers"]["WWWAuthenticate"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["UnauthenticatedError"];
                };
            };
            /** @description NO_ROLE: you have no role in the class (nothing else about it is revealed). SCOPE_DENIED: your role may not read or write that field. WEAK_IDENTITY: your credential is below the class or field floor (required, presented). IDENTITY_MISMATCH: your X-Svc-Scope is in use by another identity. */
            403: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["NoRoleError"] | components["schemas"]["ScopeDeniedError"] | components["schemas"]["WeakIdentityError"] | components["schemas"]["IdentityMismatchError"];
                };
            };
            /** @description NOT_FOUND: the class or record does not exist. */
            404: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["NotFoundError"];
                };
            };
            405: components["responses"]["MethodNotAllowed"];
            /** @description HELD: another identity holds the lease (owner, lease_expires_at). STALE: the field moved since the version you read; re-read and decide again. STALE_PREMISE: a premise moved (moved lists them); re-read and decide again. IDEMPOTENCY_KEY_IN_USE: a request with this Idempotency-Key is still running; retry with the same key after Retry-After. */
            409: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["HeldError"] | components["schemas"]["StaleError"] | components["schemas"]["StalePremiseError"] | components["schemas"]["IdempotencyKeyInUseError"];
                };
            };
            /** @description CLASS_GONE: the class was deleted; its records can be read, not written. */
            410: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ClassGoneError"];
                };
            };
            /** @description UNKNOWN_FIELD: the class has no such field. NOT_WRITABLE: put on an append or task field. NOT_APPEND_FIELD: append on a field that is not an append field. NOT_TASK_FIELD: claim on a field that is not a task field. EVIDENCE_REQUIRED: the class or field wants evidence. INVALID_CHECKPOINT: the checkpoint document is not an object, over 64 KiB or lacks a section, or status resolved needs a role's checkpoint first. IDEMPOTENCY_KEY_REUSED: the Idempotency-Key was used for a different request (operation, record, field or body); use a fresh key. */
            422: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["UnknownFieldError"] | components["schemas"]["NotWritableError"] | components["schemas"]["NotAppendFieldError"] | components["schemas"]["NotTaskFieldError"] | components["schemas"]["EvidenceRequiredError"] | components["schemas"]["InvalidCheckpointError"] | components["schemas"]["IdempotencyKeyReusedError"];
                };
            };
            /** @description RATE_LIMITED: too many rejected credentials from your address; wait a few seconds. */
            429: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["RateLimitedError"];
                };
            };
            /** @description INTERNAL: a fault; quote request_id to the operator. */
            500: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["InternalError"];
                };
            };
            /** @description UNAVAILABLE: the database is unreachable, slow (--db-timeout) or being migrated, or an identity provider cannot judge right now; retry. */
            503: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    "Retry-After": components["headers"]["RetryAfter"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["UnavailableError"];
                };
            };
        };
    };
    watchRecord: {
        parameters: {
            query?: {
                /** @description Send every applied change with a higher record_version first (default: the current version). Last-Event-ID wins over it. */
                from_record_version?: number;
            };
            header?: {
                /** @description Your run (e.g. a fresh UUID per agent run), 1 to 256 bytes of text: what you read in it becomes the premises of your later writes without based_on (15 minutes). A scope belongs to the first identity using it: another one gets IDENTITY_MISMATCH. */
                "X-Svc-Scope"?: components["parameters"]["XSvcScope"];
                /** @description Resume right after this event (the id of the last event received); wins over the query parameter. */
                "Last-Event-ID"?: string;
                /** @description Your id for the request, echoed back; one that does not match the pattern is replaced by a fresh one (never refused). */
                "X-Request-Id"?: components["parameters"]["XRequestId"];
            };
            path: {
                /** @description The class name. */
                class: string;
                /** @description The record id: at most 256 bytes, no "/", matching the class idPattern. */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The stream; event ids are record_versions. */
            200: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "text/event-stream": string;
                };
            };
            /** @description MALFORMED: bad JSON or UTF-8, a missing, unknown or repeated key or parameter, a wrong type or enum, a bad id or cursor, a body over 4 MiB. */
            400: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["MalformedError"];
                };
            };
            /** @description UNAUTHENTICATED: no credential, or one no identity provider accepts. */
            401: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    "WWW-Authenticate": components["headers"]["WWWAuthenticate"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["UnauthenticatedError"];
                };
            };
            /** @description NO_ROLE: you have no role in the class (nothing else about it is revealed). IDENTITY_MISMATCH: your X-Svc-Scope is in use by another identity. */
            403: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["NoRoleError"] | components["schemas"]["IdentityMismatchError"];
                };
            };
            /** @description NOT_FOUND: the class or record does not exist. */
            404: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["NotFoundError"];
                };
            };
            405: components["responses"]["MethodNotAllowed"];
            /** @description RATE_LIMITED: too many rejected credentials from your address; wait a few seconds. */
            429: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["RateLimitedError"];
                };
            };
            /** @description INTERNAL: a fault; quote request_id to the operator. */
            500: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["InternalError"];
                };
            };
            /** @description UNAVAILABLE: the database is unreachable, slow (--db-timeout) or being migrated, or an identity provider cannot judge right now; retry. */
            503: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    "Retry-After": components["headers"]["RetryAfter"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["UnavailableError"];
                };
            };
        };
    };
    watchClass: {
        parameters: {
            query?: {
                /** @description A cursor: the id of an event of this class watch; resume right after it (default: now). Last-Event-ID wins over it. */
                from?: string;
            };
            header?: {
                /** @description Your run (e.g. a fresh UUID per agent run), 1 to 256 bytes of text: what you read in it becomes the premises of your later writes without based_on (15 minutes). A scope belongs to the first identity using it: another one gets IDENTITY_MISMATCH. */
                "X-Svc-Scope"?: components["parameters"]["XSvcScope"];
                /** @description Resume right after this event (the id of the last event received); wins over the query parameter. */
                "Last-Event-ID"?: string;
                /** @description Your id for the request, echoed back; one that does not match the pattern is replaced by a fresh one (never refused). */
                "X-Request-Id"?: components["parameters"]["XRequestId"];
            };
            path: {
                /** @description The class name. */
                class: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The stream; event ids are cursors. */
            200: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "text/event-stream": string;
                };
            };
            /** @description MALFORMED: bad JSON or UTF-8, a missing, unknown or repeated key or parameter, a wrong type or enum, a bad id or cursor, a body over 4 MiB. */
            400: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["MalformedError"];
                };
            };
            /** @description UNAUTHENTICATED: no credential, or one no identity provider accepts. */
            401: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    "WWW-Authenticate": components["headers"]["WWWAuthenticate"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["UnauthenticatedError"];
                };
            };
            /** @description NO_ROLE: you have no role in the class (nothing else about it is revealed). IDENTITY_MISMATCH: your X-Svc-Scope is in use by another identity. */
            403: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["NoRoleError"] | components["schemas"]["IdentityMismatchError"];
                };
            };
            /** @description NOT_FOUND: the class or record does not exist. */
            404: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["NotFoundError"];
                };
            };
            405: components["responses"]["MethodNotAllowed"];
            /** @description EXPIRED: the class watch cursor is older than the retained window (--watch-retention); oldest is the oldest cursor still available. */
            410: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ExpiredError"];
                };
            };
            /** @description RATE_LIMITED: too many rejected credentials from your address; wait a few seconds. */
            429: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["RateLimitedError"];
                };
            };
            /** @description INTERNAL: a fault; quote request_id to the operator. */
            500: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["InternalError"];
                };
            };
            /** @description UNAVAILABLE: the database is unreachable, slow (--db-timeout) or being migrated, or an identity provider cannot judge right now; retry. */
            503: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    "Retry-After": components["headers"]["RetryAfter"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["UnavailableError"];
                };
            };
        };
    };
    protectedResource: {
        parameters: {
            query?: never;
            header?: {
                /** @description Your id for the request, echoed back; one that does not match the pattern is replaced by a fresh one (never refused). */
                "X-Request-Id"?: components["parameters"]["XRequestId"];
            };
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The metadata. */
            200: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ProtectedResourceMetadata"];
                };
            };
            /** @description NOT_FOUND: the class or record does not exist. */
            404: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["NotFoundError"];
                };
            };
            405: components["responses"]["MethodNotAllowed"];
        };
    };
    protectedResourceMcp: {
        parameters: {
            query?: never;
            header?: {
                /** @description Your id for the request, echoed back; one that does not match the pattern is replaced by a fresh one (never refused). */
                "X-Request-Id"?: components["parameters"]["XRequestId"];
            };
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The metadata. */
            200: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ProtectedResourceMetadata"];
                };
            };
            /** @description NOT_FOUND: the class or record does not exist. */
            404: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["NotFoundError"];
                };
            };
            405: components["responses"]["MethodNotAllowed"];
        };
    };
    protectedResourceMcpSession: {
        parameters: {
            query?: never;
            header?: {
                /** @description Your id for the request, echoed back; one that does not match the pattern is replaced by a fresh one (never refused). */
                "X-Request-Id"?: components["parameters"]["XRequestId"];
            };
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The metadata. */
            200: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ProtectedResourceMetadata"];
                };
            };
            /** @description NOT_FOUND: the class or record does not exist. */
            404: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["NotFoundError"];
                };
            };
            405: components["responses"]["MethodNotAllowed"];
        };
    };
    healthz: {
        parameters: {
            query?: never;
            header?: {
                /** @description Your id for the request, echoed back; one that does not match the pattern is replaced by a fresh one (never refused). */
                "X-Request-Id"?: components["parameters"]["XRequestId"];
            };
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Up. */
            200: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Health"];
                };
            };
            405: components["responses"]["MethodNotAllowed"];
        };
    };
    readyz: {
        parameters: {
            query?: never;
            header?: {
                /** @description Your id for the request, echoed back; one that does not match the pattern is replaced by a fresh one (never refused). */
                "X-Request-Id"?: components["parameters"]["XRequestId"];
            };
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Ready. */
            200: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Ready"];
                };
            };
            405: components["responses"]["MethodNotAllowed"];
            /** @description UNAVAILABLE: the database is unreachable, slow (--db-timeout) or being migrated, or an identity provider cannot judge right now; retry. */
            503: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    "Retry-After": components["headers"]["RetryAfter"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["UnavailableError"];
                };
            };
        };
    };
    openapi: {
        parameters: {
            query?: never;
            header?: {
                /** @description An ETag of an earlier answer: 304 while the document has not changed. */
                "If-None-Match"?: string;
                /** @description Your id for the request, echoed back; one that does not match the pattern is replaced by a fresh one (never refused). */
                "X-Request-Id"?: components["parameters"]["XRequestId"];
            };
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The document. */
            200: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    "Cache-Control": components["headers"]["CacheControl"];
                    ETag: components["headers"]["ETag"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        openapi: string;
                    };
                };
            };
            /** @description Not modified: the ETag sent is current. */
            304: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    "Cache-Control": components["headers"]["CacheControl"];
                    ETag: components["headers"]["ETag"];
                    [name: string]: unknown;
                };
                content?: never;
            };
            405: components["responses"]["MethodNotAllowed"];
        };
    };
    mcpStream: {
        parameters: {
            query?: never;
            header?: {
                /** @description Your id for the request, echoed back; one that does not match the pattern is replaced by a fresh one (never refused). */
                "X-Request-Id"?: components["parameters"]["XRequestId"];
            };
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description UNAUTHENTICATED: no credential, or one no identity provider accepts. */
            401: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    "WWW-Authenticate": components["headers"]["WWWAuthenticate"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["UnauthenticatedError"];
                };
            };
            /** @description Not offered. */
            405: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    Allow: components["headers"]["Allow"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["JsonRpcError"];
                };
            };
            /** @description RATE_LIMITED: too many rejected credentials from your address; wait a few seconds. */
            429: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["RateLimitedError"];
                };
            };
        };
    };
    mcp: {
        parameters: {
            query?: {
                /** @description true: every check runs against the current state and the answer is what the write would answer now (the versions it would get, or the exact rejection) with "dry_run": true; nothing is written (no history row, no version, no idempotency key, no metrics of applied writes). */
                dry_run?: components["parameters"]["DryRun"];
            };
            header?: {
                /** @description Your run (e.g. a fresh UUID per agent run), 1 to 256 bytes of text: what you read in it becomes the premises of your later writes without based_on (15 minutes). A scope belongs to the first identity using it: another one gets IDENTITY_MISMATCH. */
                "X-Svc-Scope"?: components["parameters"]["XSvcScope"];
                /** @description Your key for this logical write (e.g. a fresh UUID), 1 to 255 printable ASCII characters (draft-ietf-httpapi-idempotency-key-header). The answer (2xx or 4xx) is stored with the write in one transaction and kept 24 h (--idempotency-ttl): a retry with the same key and request (operation, record, field, body) gets it byte for byte with `Idempotent-Replayed: true` and writes nothing. The same key with another request: 422 IDEMPOTENCY_KEY_REUSED; while the first still runs: 409 IDEMPOTENCY_KEY_IN_USE with Retry-After. Keys are per identity. A 5xx is not stored: retry with the same key. */
                "Idempotency-Key"?: components["parameters"]["IdempotencyKey"];
                /** @description Your id for the request, echoed back; one that does not match the pattern is replaced by a fresh one (never refused). */
                "X-Request-Id"?: components["parameters"]["XRequestId"];
            };
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["JsonRpcMessage"];
            };
        };
        responses: {
            /** @description The JSON-RPC response. */
            200: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["JsonRpcResponse"];
                };
            };
            /** @description A notification or response was accepted (no body). */
            202: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description Not a valid JSON-RPC message, or larger than 4 MiB + 64 KiB. */
            400: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["JsonRpcError"];
                };
            };
            /** @description UNAUTHENTICATED: no credential, or one no identity provider accepts. */
            401: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    "WWW-Authenticate": components["headers"]["WWWAuthenticate"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["UnauthenticatedError"];
                };
            };
            405: components["responses"]["MethodNotAllowed"];
            /** @description Accept does not list application/json and text/event-stream. */
            406: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["JsonRpcError"];
                };
            };
            /** @description Content-Type is not application/json. */
            415: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["JsonRpcError"];
                };
            };
            /** @description RATE_LIMITED: too many rejected credentials from your address; wait a few seconds. */
            429: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["RateLimitedError"];
                };
            };
        };
    };
    mcpEndSession: {
        parameters: {
            query?: never;
            header?: {
                /** @description Your id for the request, echoed back; one that does not match the pattern is replaced by a fresh one (never refused). */
                "X-Request-Id"?: components["parameters"]["XRequestId"];
            };
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description UNAUTHENTICATED: no credential, or one no identity provider accepts. */
            401: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    "WWW-Authenticate": components["headers"]["WWWAuthenticate"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["UnauthenticatedError"];
                };
            };
            /** @description No session to end. */
            405: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    Allow: components["headers"]["Allow"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["JsonRpcError"];
                };
            };
            /** @description RATE_LIMITED: too many rejected credentials from your address; wait a few seconds. */
            429: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["RateLimitedError"];
                };
            };
        };
    };
    mcpSessionStream: {
        parameters: {
            query?: never;
            header?: {
                /** @description The session. */
                "Mcp-Session-Id"?: string;
                /** @description Your id for the request, echoed back; one that does not match the pattern is replaced by a fresh one (never refused). */
                "X-Request-Id"?: components["parameters"]["XRequestId"];
            };
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The stream; each event is a JSON-RPC notification. */
            200: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "text/event-stream": string;
                };
            };
            /** @description No Mcp-Session-Id. */
            400: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["JsonRpcError"];
                };
            };
            /** @description UNAUTHENTICATED: no credential, or one no identity provider accepts. */
            401: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    "WWW-Authenticate": components["headers"]["WWWAuthenticate"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["UnauthenticatedError"];
                };
            };
            /** @description Session not found (JSON-RPC -32001). NOT_FOUND: the class or record does not exist. */
            404: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["JsonRpcError"] | components["schemas"]["NotFoundError"];
                };
            };
            405: components["responses"]["MethodNotAllowed"];
            /** @description Accept does not list text/event-stream. */
            406: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["JsonRpcError"];
                };
            };
            /** @description The session already has its stream open. */
            409: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["JsonRpcError"];
                };
            };
            /** @description RATE_LIMITED: too many rejected credentials from your address; wait a few seconds. */
            429: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["RateLimitedError"];
                };
            };
        };
    };
    mcpSession: {
        parameters: {
            query?: {
                /** @description true: every check runs against the current state and the answer is what the write would answer now (the versions it would get, or the exact rejection) with "dry_run": true; nothing is written (no history row, no version, no idempotency key, no metrics of applied writes). */
                dry_run?: components["parameters"]["DryRun"];
            };
            header?: {
                /** @description Your run (e.g. a fresh UUID per agent run), 1 to 256 bytes of text: what you read in it becomes the premises of your later writes without based_on (15 minutes). A scope belongs to the first identity using it: another one gets IDENTITY_MISMATCH. */
                "X-Svc-Scope"?: components["parameters"]["XSvcScope"];
                /** @description Your key for this logical write (e.g. a fresh UUID), 1 to 255 printable ASCII characters (draft-ietf-httpapi-idempotency-key-header). The answer (2xx or 4xx) is stored with the write in one transaction and kept 24 h (--idempotency-ttl): a retry with the same key and request (operation, record, field, body) gets it byte for byte with `Idempotent-Replayed: true` and writes nothing. The same key with another request: 422 IDEMPOTENCY_KEY_REUSED; while the first still runs: 409 IDEMPOTENCY_KEY_IN_USE with Retry-After. Keys are per identity. A 5xx is not stored: retry with the same key. */
                "Idempotency-Key"?: components["parameters"]["IdempotencyKey"];
                /** @description The session, after initialize. */
                "Mcp-Session-Id"?: string;
                /** @description Your id for the request, echoed back; one that does not match the pattern is replaced by a fresh one (never refused). */
                "X-Request-Id"?: components["parameters"]["XRequestId"];
            };
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["JsonRpcMessage"];
            };
        };
        responses: {
            /** @description The JSON-RPC response (initialize: with the new Mcp-Session-Id). */
            200: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    "Mcp-Session-Id": components["headers"]["McpSessionId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["JsonRpcResponse"];
                };
            };
            /** @description A notification or response was accepted (no body). */
            202: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description Not a valid JSON-RPC message, larger than 4 MiB + 64 KiB, or not initialize without an Mcp-Session-Id. */
            400: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["JsonRpcError"];
                };
            };
            /** @description UNAUTHENTICATED: no credential, or one no identity provider accepts. */
            401: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    "WWW-Authenticate": components["headers"]["WWWAuthenticate"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["UnauthenticatedError"];
                };
            };
            /** @description Session not found (JSON-RPC -32001): unknown, ended, on another replica or of another identity; initialize again. NOT_FOUND: the class or record does not exist. */
            404: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["JsonRpcError"] | components["schemas"]["NotFoundError"];
                };
            };
            405: components["responses"]["MethodNotAllowed"];
            /** @description Accept does not list application/json and text/event-stream. */
            406: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["JsonRpcError"];
                };
            };
            /** @description Content-Type is not application/json. */
            415: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["JsonRpcError"];
                };
            };
            /** @description RATE_LIMITED: too many rejected credentials from your address; wait a few seconds. */
            429: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["RateLimitedError"];
                };
            };
            /** @description UNAVAILABLE: the database is unreachable, slow (--db-timeout) or being migrated, or an identity provider cannot judge right now; retry. */
            503: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    "Retry-After": components["headers"]["RetryAfter"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["UnavailableError"];
                };
            };
        };
    };
    mcpSessionEnd: {
        parameters: {
            query?: never;
            header?: {
                /** @description The session. */
                "Mcp-Session-Id"?: string;
                /** @description Your id for the request, echoed back; one that does not match the pattern is replaced by a fresh one (never refused). */
                "X-Request-Id"?: components["parameters"]["XRequestId"];
            };
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Ended. */
            200: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description No Mcp-Session-Id. */
            400: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["JsonRpcError"];
                };
            };
            /** @description UNAUTHENTICATED: no credential, or one no identity provider accepts. */
            401: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    "WWW-Authenticate": components["headers"]["WWWAuthenticate"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["UnauthenticatedError"];
                };
            };
            /** @description Session not found. NOT_FOUND: the class or record does not exist. */
            404: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["JsonRpcError"] | components["schemas"]["NotFoundError"];
                };
            };
            405: components["responses"]["MethodNotAllowed"];
            /** @description RATE_LIMITED: too many rejected credentials from your address; wait a few seconds. */
            429: {
                headers: {
                    "X-Request-Id": components["headers"]["XRequestId"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["RateLimitedError"];
                };
            };
        };
    };
}
