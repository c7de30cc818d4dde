/**
 * The `apikey` identity provider: shared secrets listed in a key file (decisions §2).
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { watch, type FSWatcher } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import { basename, dirname } from 'node:path';
import { parseDocument } from 'yaml';
import type { Identity, IdentityProvider } from '../../handlers/types.js';

/** Where the provider reports loads, reloads and bad files. Never receives a key. */
export interface KeyFileLog {
  warn(msg: string): void;
  info(msg: string): void;
  error(msg: string): void;
}

interface KeyEntry {
  name: string;
  /** SHA-256 of the key; plaintext keys are hashed at load and not kept. */
  digest: Buffer;
  plaintext: boolean;
}

/** Identity of the file's current contents; a rename-replace changes `ino`. */
interface FileSignature {
  ino: number;
  size: number;
  mtimeMs: number;
  ctimeMs: number;
}

const FORMAT_HINT =
  'expected YAML of the form "keys: [ { name: <name>, sha256: <64 hex chars> } | { name: <name>, key: <plaintext> } ]"';

const RELOAD_DEBOUNCE_MS = 100;

const SHA256_HEX = /^[0-9a-fA-F]{64}$/;

/** A key file problem whose message is safe to log: it never quotes a key or digest. */
class KeyFileError extends Error {}

function sha256(s: string): Buffer {
  return createHash('sha256').update(s, 'utf8').digest();
}

function sameSignature(a: FileSignature | undefined, b: FileSignature): boolean {
  return (
    a !== undefined &&
    a.ino === b.ino &&
    a.size === b.size &&
    a.mtimeMs === b.mtimeMs &&
    a.ctimeMs === b.ctimeMs
  );
}

async function signatureOf(path: string): Promise<FileSignature> {
  const s = await stat(path);
  return { ino: s.ino, size: s.size, mtimeMs: s.mtimeMs, ctimeMs: s.ctimeMs };
}

function describeIoError(e: unknown): string {
  const code = (e as NodeJS.ErrnoException | undefined)?.code;
  if (code === 'ENOENT') return 'the file does not exist';
  if (code === 'EACCES' || code === 'EPERM') return 'permission denied reading the file';
  if (code === 'EISDIR') return 'the path is a directory, not a file';
  return `cannot read the file (${code ?? String(e)})`;
}

/**
 * Parses and validates key-file text. Error messages name entries by position and name
 * only: the yaml library's own messages quote source lines, which may hold a key.
 */
function parseKeyFile(text: string): KeyEntry[] {
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
 * Accepts tokens listed in a key file; author `apikey:<name>`, strength `shared-secret`.
 * The file is watched and reloaded when it changes; a bad reload keeps the previous keys.
 */
export class ApiKeyProvider implements IdentityProvider {
  readonly kind = 'apikey';

  private entries: KeyEntry[];
  private signature: FileSignature | undefined;
  private watcher: FSWatcher | undefined;
  private timer: NodeJS.Timeout | undefined;
  private reloading: Promise<void> = Promise.resolve();
  private closed = false;

  private constructor(
    private readonly path: string,
    private readonly log: KeyFileLog,
    entries: KeyEntry[],
    signature: FileSignature,
  ) {
    this.entries = entries;
    this.signature = signature;
  }

  /**
   * Loads the key file at `path` and starts watching it.
   * Throws an Error naming the path and the problem when the file is missing or invalid.
   */
  static async open(path: string, log: KeyFileLog): Promise<ApiKeyProvider> {
    let signature: FileSignature;
    let text: string;
    try {
      // Signature first: a change landing between stat and read triggers another reload.
      signature = await signatureOf(path);
      text = await readFile(path, 'utf8');
    } catch (e) {
      throw new Error(`apikey key file ${path}: ${describeIoError(e)}; ${FORMAT_HINT}`);
    }
    let entries: KeyEntry[];
    try {
      entries = parseKeyFile(text);
    } catch (e) {
      if (e instanceof KeyFileError) {
        throw new Error(`apikey key file ${path} is invalid: ${e.message}; ${FORMAT_HINT}`);
      }
      throw e;
    }
    const provider = new ApiKeyProvider(path, log, entries, signature);
    provider.announce(entries, 'loaded');
    provider.startWatching();
    return provider;
  }

  /** Number of keys currently accepted. */
  get size(): number {
    return this.entries.length;
  }

  async authenticate(token: string): Promise<Identity | null> {
    const presented = sha256(token);
    let match: KeyEntry | undefined;
    // Every entry is compared, with no early exit, so timing reveals neither whether
    // nor which entry matched.
    for (const entry of this.entries) {
      if (timingSafeEqual(presented, entry.digest)) match = entry;
    }
    if (match === undefined) return null;
    return { author: `apikey:${match.name}`, provider: 'apikey', name: match.name, strength: 'shared-secret' };
  }

  /** Stops watching the key file. The keys loaded last stay in effect. */
  close(): void {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.watcher?.close();
    this.watcher = undefined;
  }

  private announce(entries: KeyEntry[], verb: string): void {
    for (const e of entries) {
      if (e.plaintext) {
        this.log.warn(
          `apikey key file ${this.path}: entry "${e.name}" holds a plaintext key; ` +
            `replace "key" with "sha256" (the SHA-256 hex of the key)`,
        );
      }
    }
    this.log.info(`apikey key file ${this.path}: ${verb} ${entries.length} key(s)`);
    if (entries.length === 0) {
      this.log.warn(`apikey key file ${this.path} lists no keys; the apikey provider accepts no token`);
    }
  }

  /**
   * Watches the directory, not the file: editors replace files by rename and Kubernetes
   * swaps a `..data` symlink, neither of which a watch on the old inode would see.
   * Any event in the directory leads to a cheap stat; only a changed file is re-read.
   */
  private startWatching(): void {
    try {
      this.watcher = watch(dirname(this.path), { persistent: true }, () => this.schedule());
      this.watcher.on('error', (e) => {
        this.log.error(
          `apikey key file ${this.path}: watching ${dirname(this.path)} failed (${e.message}); ` +
            `changes to the file are no longer picked up, restart to reload it`,
        );
      });
    } catch (e) {
      this.log.error(
        `apikey key file ${this.path}: cannot watch ${dirname(this.path)} (${(e as Error).message}); ` +
          `changes to ${basename(this.path)} are not picked up until restart`,
      );
    }
  }

  private schedule(): void {
    if (this.closed) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.reloading = this.reloading
        .then(() => this.reloadIfChanged())
        .catch(() => this.reportBadReload('unexpected error while reloading'));
    }, RELOAD_DEBOUNCE_MS);
  }

  private async reloadIfChanged(): Promise<void> {
    if (this.closed) return;
    let signature: FileSignature;
    let text: string;
    try {
      signature = await signatureOf(this.path);
      if (sameSignature(this.signature, signature)) return;
      text = await readFile(this.path, 'utf8');
    } catch (e) {
      // Remember the failure so a missing file is reported once, not on every event.
      if (this.signature === undefined) return;
      this.signature = undefined;
      this.reportBadReload(describeIoError(e));
      return;
    }
    if (this.closed) return;
    this.signature = signature;
    let entries: KeyEntry[];
    try {
      entries = parseKeyFile(text);
    } catch (e) {
      this.reportBadReload(e instanceof KeyFileError ? e.message : 'unexpected error while parsing');
      return;
    }
    this.entries = entries;
    this.announce(entries, 'reloaded');
  }

  private reportBadReload(problem: string): void {
    this.log.error(
      `apikey key file ${this.path}: reload failed, ${problem}; still accepting the previous ` +
        `${this.entries.length} key(s). Fix the file (${FORMAT_HINT}); it is re-read on its next change`,
    );
  }
}
