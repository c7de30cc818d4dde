/**
 * The `apikey` identity provider: shared secrets listed in a key file (decisions §2).
 */
import { watch, type FSWatcher } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import { basename, dirname } from 'node:path';
import { FORMAT_HINT, KeyFileError, KeyListProvider, parseKeyFile, parseKeys, type KeyEntry } from './apikey-keys.js';

/** Where the provider reports loads, reloads and bad files. Never receives a key. */
export interface KeyFileLog {
  warn(msg: string): void;
  info(msg: string): void;
  error(msg: string): void;
}

/** Identity of the file's current contents; a rename-replace changes `ino`. */
interface FileSignature {
  ino: number;
  size: number;
  mtimeMs: number;
  ctimeMs: number;
}

const RELOAD_DEBOUNCE_MS = 100;

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
 * Accepts tokens listed in a key file; author `apikey:<name>`, strength `shared-secret`.
 * The file is watched and reloaded when it changes; a bad reload keeps the previous keys.
 */
export class ApiKeyProvider extends KeyListProvider {
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
    super(entries);
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
    const entries = parseKeys(text, `apikey key file ${path} is`);
    const provider = new ApiKeyProvider(path, log, entries, signature);
    provider.announce(entries, 'loaded');
    provider.startWatching();
    return provider;
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
