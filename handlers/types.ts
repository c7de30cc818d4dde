/**
 * Types shared by handlers, the runtime and the worker. Pure: no runtime imports.
 */
import type { ObjectEntries } from 'valibot';

/** How well a credential is bound to a workload (decisions §2), strongest first. */
import type { Strength } from './strength.js';
export type { Strength };

/** The caller, as worked out by an identity provider before any handler runs. */
export interface Identity {
  /** `<provider>:<name>`, e.g. `apikey:alice`; recorded as the author of writes. */
  author: string;
  /** Provider kind: `apikey`, `k8s-sa`, `oidc`. */
  provider: string;
  name: string;
  strength: Strength;
}

/** What a provider may ask of the request whose token it judges. */
export interface AuthAttempt {
  /**
   * Called before a check that costs a call to someone else (a TokenReview): spends one
   * token of the client address's rejected-credential budget up front, returned if the
   * credential is accepted, and throws SvcError RATE_LIMITED while the budget is spent. So a
   * flood of made-up tokens from one address is refused before it reaches the identity
   * provider, not after each review came back. Once per request at most.
   */
  charge(): void;
}

/** One entry of the `--identity` list: answers null when the token is not its kind. */
export interface IdentityProvider {
  readonly kind: string;
  /**
   * The caller's identity, or null when the token is not this provider's (the next one is
   * tried). Throws SvcError UNAUTHENTICATED for a token that is this provider's but bad, and
   * UNAVAILABLE (503) when the provider cannot judge right now (its issuer or API is down).
   */
  authenticate(token: string, attempt?: AuthAttempt): Promise<Identity | null>;
  /** Why the provider cannot verify tokens yet (shown by /readyz), or null when it can. */
  notReady?(): string | null;
  /**
   * The OAuth authorization server (issuer) a client can get this provider's tokens from
   * (oidc); the gateway names it in its protected resource metadata (RFC 9728) so that MCP
   * clients can sign in there.
   */
  readonly authorizationServer?: string;
}

export type FieldKind = 'versioned' | 'soft' | 'append' | 'task';
export type FieldType = 'string' | 'integer' | 'number' | 'boolean' | 'object' | 'array' | 'any';

/** A field definition inside a SharedContext `spec.fields` (decisions §1). */
/**
 * `durability` (issue 38): `strict` (the default) commits a write only once its WAL is flushed;
 * `relaxed` lets a write that touches only relaxed fields commit without waiting for the flush
 * (synchronous_commit = off): a database crash may lose its last few hundred ms of such writes.
 * Only soft and append fields may be relaxed, never a versioned or task field.
 */
export type Durability = 'strict' | 'relaxed';

export interface FieldDef {
  kind: FieldKind;
  /** Absent: the class's durability for soft and append fields, strict for versioned and task fields. */
  durability?: Durability;
  type?: FieldType;
  enum?: unknown[];
  requireEvidence?: boolean;
  minIdentityStrength?: Strength;
  leaseSeconds?: number;
}

export interface RoleDef {
  subjects: string[];
  read: string[];
  write: string[];
}

export interface CheckpointDef {
  sections?: string[];
  requiredForResolve?: string[];
}

/** `spec.history`: rows older than maxAge, beyond the newest keepLast per field, rejected rows older than rejectedMaxAge are purged. */
export interface HistoryRetention {
  maxAge?: string;
  keepLast?: number;
  rejectedMaxAge?: string;
}

/** `spec` of a SharedContext manifest, as validated. */
export interface ClassSpec {
  idPattern?: string;
  minIdentityStrength?: Strength;
  requireEvidence?: boolean;
  ttl?: string | null;
  /** The longest `ttl_seconds` a write may give a record (issue 37); absent = up to ten years. */
  maxTtl?: string;
  /** Which history rows the sweep purges (issue 37); absent = every row kept. */
  history?: HistoryRetention;
  /** The default durability of the class's soft and append fields (issue 38); absent = strict. */
  durability?: Durability;
  fields: Record<string, FieldDef>;
  roles: Record<string, RoleDef>;
  checkpoint?: CheckpointDef;
}

/** A SharedContext manifest (apiVersion kslate.dev/v1). */
export interface ClassManifest {
  apiVersion: 'kslate.dev/v1';
  kind: 'SharedContext';
  metadata: { name: string; namespace: string };
  spec: ClassSpec;
}

/**
 * How an operation appears as an MCP tool, or as one `action` of a tool that carries several
 * (decisions §7). The tool listing is built from this and nothing else: its input schema is the
 * address the MCP transport adds (record, field, class, action) and `args`, which are entries of
 * the handler's own valibot schema (its body, or for a read its parameters), never a copy.
 */
export interface McpSurface {
  tool: string;
  /** The `action` argument that selects this operation when one tool carries several. */
  action?: string;
  title: string;
  /** Sentences of the description; a tool with several actions joins its operations' sentences in order. */
  description: readonly string[];
  annotations: { readOnlyHint?: boolean; destructiveHint?: boolean; idempotentHint?: boolean; openWorldHint?: boolean };
  /** The arguments besides the address: entries of the handler's own schema. */
  args: ObjectEntries;
  /**
   * Arguments every successful call sends though the handler parses them as optional, so that
   * their absence is refused at its own step of the rejection order (append's evidence:
   * EVIDENCE_REQUIRED, recorded in history) rather than as a malformed body.
   */
  required?: readonly string[];
}
