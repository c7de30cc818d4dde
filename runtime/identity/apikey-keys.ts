/**
 * The `apikey` key list, runtime-neutral: parsing the key-file text (decisions §2) and
 * matching a presented token. The Node provider (apikey.ts) reads and watches a file; the
 * Workers adapter parses the `KSLATE_APIKEYS` secret. `node:crypto`'s hash and constant-time
 * compare are among what Workers' `nodejs_compat` provides; nothing here touches a file.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { parseDocument } from 'yaml';
import type { Identity, IdentityProvider } from '../../handlers/types.js';

/** One accepted key. */
export interface KeyEntry {
  name: string;
  /** SHA-256 of the key; plaintext keys are hashed at load and not kept. */
  digest: Buffer;
  plaintext: boolean;
}

export const FORMAT_HINT =
  'expected YAML of the form "keys: [ { name: <name>, sha256: <64 hex chars> } | { name: <name>, key: <plaintext> } ]"';

const SHA256_HEX = /^[0-9a-fA-F]{64}$/;

/** A key file problem whose message is safe to log: it never quotes a key or digest. */
export class KeyFileError extends Error {}

function sha256(s: string): Buffer {
  return createHash('sha256').update(s, 'utf8').digest();
}

/**
 * Parses and validates key-file text. Error messages name entries by position and name
 * only: the yaml library's own messages quote source lines, which may hold a key.
 */
export function parseKeyFile(text: string): KeyEntry[] {
  const doc = parseDocument(text, { prettyErrors: false, uniqueKeys: true });
  if (doc.errors.length > 0) {
    const err = doc.errors[0]!;
    const before = text.slice(0, err.pos[0]);
    const line = before.split('\n').length;
    const col = before.length - before.lastIndexOf('\n');
    const at = ` at line ${line}, column ${col}`;
    throw new KeyFileError(`not valid YAML${at} (${err.code})`);
  }
  const root: unknown = doc.toJS();
  if (root === null || root === undefined) throw new KeyFileError('the file is empty');
  if (typeof root !== 'object' || Array.isArray(root)) {
    throw new KeyFileError('the top level must be a mapping with a "keys" list');
  }
  const list = (root as Record<string, unknown>).keys;
  if (!Array.isArray(list)) throw new KeyFileError('"keys" is missing or not a list');

  const entries: KeyEntry[] = [];
  const byName = new Map<string, number>();
  const byDigest = new Map<string, string>();
  list.forEach((raw, i) => {
    const where = `keys[${i}]`;
    if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
      throw new KeyFileError(`${where} must be a mapping with "name" and "sha256" or "key"`);
    }
    const e = raw as Record<string, unknown>;
    if (typeof e.name !== 'string' || e.name.trim() === '') {
      throw new KeyFileError(`${where}: "name" must be a non-empty string (quote it if it looks like a number)`);
    }
    const name = e.name;
    const label = `${where} (name "${name}")`;
    const prior = byName.get(name);
    if (prior !== undefined) {
      throw new KeyFileError(`${label}: duplicate name, also used by keys[${prior}]; names must be unique`);
    }
    const hasSha = e.sha256 !== undefined && e.sha256 !== null;
    const hasKey = e.key !== undefined && e.key !== null;
    if (hasSha === hasKey) {
      throw new KeyFileError(`${label}: needs exactly one of "sha256" or "key"`);
    }
    let digest: Buffer;
    if (hasSha) {
      if (typeof e.sha256 !== 'string' || !SHA256_HEX.test(e.sha256)) {
        throw new KeyFileError(`${label}: "sha256" must be 64 hexadecimal characters (the SHA-256 of the key)`);
      }
      digest = Buffer.from(e.sha256, 'hex');
    } else {
      if (typeof e.key !== 'string' || e.key === '') {
        throw new KeyFileError(`${label}: "key" must be a non-empty string (quote it if it looks like a number)`);
      }
      digest = sha256(e.key);
    }
    // Two names for one key would make the author of a request ambiguous.
    const digestHex = digest.toString('hex');
    const sameKey = byDigest.get(digestHex);
    if (sameKey !== undefined) {
      throw new KeyFileError(`${label}: has the same key as name "${sameKey}"; every entry needs its own key`);
    }
    byName.set(name, i);
    byDigest.set(digestHex, name);
    entries.push({ name, digest, plaintext: hasKey });
  });
  return entries;
}

/**
 * The entry `token` is the key of, or undefined. The presented key's SHA-256 finds the one
 * entry it could be (a Map by digest, built once per key list) and is compared with that
 * entry's digest in constant time. The lookup's timing can only tell how a digest the caller
 * cannot choose compares with stored ones, which gives no way to a key (the same reasoning as
 * storing digests at all); comparing with every entry instead cost a compare per key per
 * request (64 keys: 2–4% of a get's gateway CPU, growing with the key file; docs/decisions.md, Identity).
 */
export function matchKey(entries: readonly KeyEntry[], token: string): KeyEntry | undefined {
  let index = indexes.get(entries);
  if (index === undefined) {
    index = { byDigest: new Map(entries.map((e) => [e.digest.toString('latin1'), e])), matched: new Map() };
    indexes.set(entries, index);
  }
  // A token that matched this list before needs no digest (a SHA-256 per request was ~1.5% of
  // a get's gateway CPU). Only tokens that matched are kept, at most one per entry, so nobody
  // can grow the map or evict from it by sending tokens; a reload makes a new list and so
  // forgets them all (a removed key stops working at once). A string lookup compares a
  // presented token with a kept one only when V8's (per-process seeded) hashes of the two
  // are equal, and a kept token is one that was already valid.
  const known = index.matched.get(token);
  if (known !== undefined) return known;
  const presented = sha256(token);
  const candidate = index.byDigest.get(presented.toString('latin1'));
  if (candidate === undefined || !timingSafeEqual(presented, candidate.digest)) return undefined;
  if (index.matched.size < entries.length) index.matched.set(token, candidate);
  return candidate;
}
/** Each key list's entries by digest, and the tokens that matched it (a reload makes a new list, so a new index). */
const indexes = new WeakMap<readonly KeyEntry[], { byDigest: Map<string, KeyEntry>; matched: Map<string, KeyEntry> }>();

/** The identity of a matched key: author `apikey:<name>`, strength `shared-secret`. */
export function keyIdentity(entry: KeyEntry): Identity {
  return { author: `apikey:${entry.name}`, provider: 'apikey', name: entry.name, strength: 'shared-secret' };
}

/**
 * The keys of a key-file text, or an Error saying `subject` (e.g. "apikey key file /x is") is
 * invalid and why (never a key), with the format hint.
 */
export function parseKeys(text: string, subject: string): KeyEntry[] {
  try {
    return parseKeyFile(text);
  } catch (e) {
    if (e instanceof KeyFileError) throw new Error(`${subject} invalid: ${e.message}; ${FORMAT_HINT}`);
    throw e;
  }
}

/** A provider accepting the tokens of a key list: author `apikey:<name>`, strength `shared-secret`. */
export abstract class KeyListProvider implements IdentityProvider {
  readonly kind = 'apikey';

  protected constructor(protected entries: readonly KeyEntry[]) {}

  /** Number of keys currently accepted. */
  get size(): number {
    return this.entries.length;
  }

  async authenticate(token: string): Promise<Identity | null> {
    const match = matchKey(this.entries, token);
    return match === undefined ? null : keyIdentity(match);
  }
}

/**
 * Accepts the keys of a key-file text given once (the Workers secret `KSLATE_APIKEYS`); no
 * reload: a new secret means a new deployment. `source` names the text in messages.
 */
export class StaticApiKeyProvider extends KeyListProvider {
  /** Throws an Error naming `source` and the problem (never a key) when the text is invalid. */
  static fromText(text: string, source: string): StaticApiKeyProvider {
    return new StaticApiKeyProvider(parseKeys(text, `apikey keys ${source} are`));
  }
}
