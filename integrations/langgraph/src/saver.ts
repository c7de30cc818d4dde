/**
 * KslateSaver: a LangGraph.js checkpointer on kslate records.
 *
 * Records of the class (ids from codec.recordId):
 * - `i-[prefix]`: `threads` (append) — the saver's threads, for list() without a thread;
 * - `t-[prefix, thread]`: `generation` (deleteThread starts a new one), `lanes` (append) — the
 *   thread's checkpoint namespaces;
 * - `l-[prefix, thread, generation, ns]`: `head` — the latest checkpoint, moved with
 *   compare-and-set from the parent the caller resumed from; `log` (append) — checkpoint ids;
 * - `c-[prefix, thread, generation, ns, checkpoint id]`: `doc` — the checkpoint without its
 *   channel values, the metadata, the values of the channels this step changed (`blobs`) and
 *   where every channel's current value lives (`refs`: checkpoint ids); `writes` (append) —
 *   pending writes, one entry per putWrites call.
 * Deleted threads keep their records (the audit history): they are only unreachable.
 */
import {
  BaseCheckpointSaver,
  maxChannelVersion,
  TASKS,
  WRITES_IDX_MAP,
  compareWritesSortKeys,
  copyCheckpoint,
  getCheckpointId,
  writesSortKey,
  type ChannelVersions,
  type Checkpoint,
  type CheckpointListOptions,
  type CheckpointMetadata,
  type CheckpointPendingWrite,
  type CheckpointTuple,
  type PendingWrite,
  type SerializerProtocol,
} from '@langchain/langgraph-checkpoint';
import type { RunnableConfig } from '@langchain/core/runnables';
import { KslateError, StaleError, type HistoryRow, type KslateClient, type RecordHandle } from '@kslate/client';
import { blobBytes, connect, recordId, toBlob, type Blob, type Connection } from './codec.js';

export const DEFAULT_CHECKPOINT_CLASS = 'langgraph-checkpoints';

/** Another writer moved the thread past the checkpoint this write resumed from. */
export class ThreadConflictError extends Error {
  override name = 'ThreadConflictError';
  constructor(
    readonly threadId: string,
    readonly checkpointNs: string,
    /** The checkpoint the refused write resumed from. */
    readonly expectedParent: string,
    /** The thread's latest checkpoint now. */
    readonly currentHead: string,
    readonly currentAuthor?: string,
  ) {
    super(
      `Thread "${threadId}"${checkpointNs ? ` (namespace "${checkpointNs}")` : ''} has moved on: its latest checkpoint is ${currentHead}` +
        `${currentAuthor ? ` (written by ${currentAuthor})` : ''}, not ${expectedParent} that this step resumed from. ` +
        'Another worker wrote the next step of this thread; load the latest checkpoint and decide again.',
    );
  }
}

interface Doc {
  checkpoint: Blob;
  metadata: Blob;
  parent: string | null;
  blobs: Record<string, Blob>;
  refs: Record<string, string>;
}

interface WriteEntry {
  task_id: string;
  task_path: string;
  writes: { idx: number; channel: string; value: Blob }[];
}

export interface KslateSaverOptions extends Connection {
  serde?: SerializerProtocol;
}

const headKey = (thread: string, gen: number, ns: string, id: string) => JSON.stringify([thread, gen, ns, id]);

type Configurable = { thread_id?: string; checkpoint_ns?: string; checkpoint_id?: string };

export class KslateSaver extends BaseCheckpointSaver {
  readonly client: KslateClient;
  readonly className: string;
  readonly prefix: string;

  constructor(opts: KslateSaverOptions) {
    super(opts.serde);
    this.client = connect(opts);
    this.className = opts.className ?? DEFAULT_CHECKPOINT_CLASS;
    this.prefix = opts.prefix ?? 'default';
  }

  /** The head version at which a checkpoint became its lane's head, as this saver last saw it. */
  private readonly heads = new Map<string, number>();

  private rememberHead(thread: string, gen: number, ns: string, id: string, version: number): void {
    const k = headKey(thread, gen, ns, id);
    this.heads.delete(k);
    this.heads.set(k, version);
    if (this.heads.size > 1000) this.heads.delete(this.heads.keys().next().value!);
  }

  /**
   * The audit trail of a thread: every attempt to move its head (newest first), applied or
   * refused, with its author — who wrote each step, and who was refused.
   */
  async threadHistory(threadId: string, checkpointNs = ''): Promise<HistoryRow[]> {
    const gen = (await this.generation(threadId)).value;
    const lane = await this.rec('l', [this.prefix, threadId, gen, checkpointNs]);
    try {
      return (await lane.history({ field: 'head' })).history;
    } catch (e) {
      if (e instanceof KslateError && e.code === 'NOT_FOUND') return [];
      throw e;
    }
  }

  private async rec(kind: string, parts: (string | number)[]): Promise<RecordHandle> {
    return this.client.record(this.className, await recordId(kind, parts));
  }

  private async generation(thread: string): Promise<{ value: number; version: number }> {
    const r = await (await this.rec('t', [this.prefix, thread])).find({ fields: ['generation'] });
    const f = r?.fields.generation as { value: number; version: number } | undefined;
    return { value: f?.value ?? 0, version: f?.version ?? 0 };
  }

  private async entries<T>(r: RecordHandle, field: string): Promise<T[]> {
    const got = await r.find({ fields: [field] });
    const f = got?.fields[field] as { entries?: { value: T }[] } | undefined;
    return (f?.entries ?? []).map((e) => e.value);
  }

  private async doc(thread: string, gen: number, ns: string, id: string): Promise<{ doc: Doc; writes: WriteEntry[] } | undefined> {
    const got = await (await this.rec('c', [this.prefix, thread, gen, ns, id])).find();
    const d = got?.fields.doc as { value: Doc } | undefined;
    if (!d) return undefined;
    const w = got!.fields.writes as { entries?: { value: WriteEntry }[] } | undefined;
    return { doc: d.value, writes: (w?.entries ?? []).map((e) => e.value) };
  }

  /** The pending writes in LangGraph's order; for one (task, idx), the first (idx ≥ 0) or last (special channels) wins, as in MemorySaver. */
  private async pending(entries: WriteEntry[]): Promise<{ key: ReturnType<typeof writesSortKey>; w: CheckpointPendingWrite }[]> {
    const byKey = new Map<string, { key: ReturnType<typeof writesSortKey>; task: string; channel: string; value: Blob }>();
    for (const e of entries) {
      for (const w of e.writes) {
        const k = `${e.task_id}\u0000${w.idx}`;
        if (w.idx >= 0 && byKey.has(k)) continue;
        byKey.set(k, { key: writesSortKey(e.task_path ?? '', e.task_id, w.idx), task: e.task_id, channel: w.channel, value: w.value });
      }
    }
    const list = [...byKey.values()].sort((a, b) => compareWritesSortKeys(a.key, b.key));
    return Promise.all(
      list.map(async (x) => ({ key: x.key, w: [x.task, x.channel, await this.serde.loadsTyped(x.value.t, blobBytes(x.value))] as CheckpointPendingWrite })),
    );
  }

  /** Builds the tuple of a stored checkpoint: channel values gathered from the checkpoints `refs` names. */
  private async tuple(thread: string, gen: number, ns: string, id: string, stored: { doc: Doc; writes: WriteEntry[] }): Promise<CheckpointTuple> {
    const { doc } = stored;
    const checkpoint = (await this.serde.loadsTyped(doc.checkpoint.t, blobBytes(doc.checkpoint))) as Checkpoint;
    const values: Record<string, unknown> = {};
    const sources = new Map<string, string[]>();
    for (const [ch, from] of Object.entries(doc.refs)) sources.set(from, [...(sources.get(from) ?? []), ch]);
    await Promise.all(
      [...sources].map(async ([from, channels]) => {
        const src = from === id ? doc : (await this.doc(thread, gen, ns, from))?.doc;
        for (const ch of channels) {
          const b = src?.blobs[ch];
          if (b) values[ch] = await this.serde.loadsTyped(b.t, blobBytes(b));
        }
      }),
    );
    checkpoint.channel_values = values;
    if (checkpoint.v < 4 && doc.parent) await this.migratePendingSends(checkpoint, thread, gen, ns, doc.parent);
    const t: CheckpointTuple = {
      config: { configurable: { thread_id: thread, checkpoint_ns: ns, checkpoint_id: id } },
      checkpoint,
      metadata: (await this.serde.loadsTyped(doc.metadata.t, blobBytes(doc.metadata))) as CheckpointMetadata,
      pendingWrites: (await this.pending(stored.writes)).map((x) => x.w),
    };
    if (doc.parent) t.parentConfig = { configurable: { thread_id: thread, checkpoint_ns: ns, checkpoint_id: doc.parent } };
    return t;
  }

  /** Checkpoints before format 4 kept pending sends as the parent's TASKS writes (as MemorySaver migrates them). */
  private async migratePendingSends(checkpoint: Checkpoint, thread: string, gen: number, ns: string, parent: string): Promise<void> {
    const p = await this.doc(thread, gen, ns, parent);
    const sends = (await this.pending(p?.writes ?? [])).filter((x) => x.w[1] === TASKS).map((x) => x.w[2]);
    checkpoint.channel_values ??= {};
    checkpoint.channel_values[TASKS] = sends;
    checkpoint.channel_versions ??= {};
    checkpoint.channel_versions[TASKS] =
      Object.keys(checkpoint.channel_versions).length > 0 ? maxChannelVersion(...Object.values(checkpoint.channel_versions)) : this.getNextVersion(undefined);
  }

  async getTuple(config: RunnableConfig): Promise<CheckpointTuple | undefined> {
    const c = (config.configurable ?? {}) as Configurable;
    const thread = c.thread_id;
    if (thread === undefined) return undefined;
    const ns = c.checkpoint_ns ?? '';
    const gen = (await this.generation(thread)).value;
    let id: string | undefined = getCheckpointId(config);
    if (!id) {
      const lane = await (await this.rec('l', [this.prefix, thread, gen, ns])).find({ fields: ['head'] });
      const head = lane?.fields.head as { value?: string; version: number } | undefined;
      id = head?.value;
      if (!id) return undefined;
      this.rememberHead(thread, gen, ns, id, head!.version);
    }
    const stored = await this.doc(thread, gen, ns, id);
    return stored ? this.tuple(thread, gen, ns, id, stored) : undefined;
  }

  async *list(config: RunnableConfig, options: CheckpointListOptions = {}): AsyncGenerator<CheckpointTuple> {
    const c = (config.configurable ?? {}) as Configurable;
    const { before, filter } = options;
    let limit = options.limit;
    const threads = c.thread_id !== undefined ? [c.thread_id] : [...new Set(await this.entries<string>(await this.rec('i', [this.prefix]), 'threads'))];
    for (const thread of threads) {
      const gen = (await this.generation(thread)).value;
      const lanes = [...new Set(await this.entries<string>(await this.rec('t', [this.prefix, thread]), `lanes`))]
        .filter((l) => l.startsWith(`${gen}:`))
        .map((l) => l.slice(String(gen).length + 1));
      for (const ns of lanes) {
        if (c.checkpoint_ns !== undefined && ns !== c.checkpoint_ns) continue;
        const ids = [...new Set(await this.entries<string>(await this.rec('l', [this.prefix, thread, gen, ns]), 'log'))].sort().reverse();
        for (const id of ids) {
          if (c.checkpoint_id && id !== c.checkpoint_id) continue;
          const b = (before?.configurable as Configurable | undefined)?.checkpoint_id;
          if (b && id >= b) continue;
          const stored = await this.doc(thread, gen, ns, id);
          if (!stored) continue;
          const t = await this.tuple(thread, gen, ns, id, stored);
          if (filter && !Object.entries(filter).every(([k, v]) => (t.metadata as Record<string, unknown> | undefined)?.[k] === v)) continue;
          if (limit !== undefined) {
            if (limit <= 0) return;
            limit--;
          }
          yield t;
        }
      }
    }
  }

  /**
   * Stores the checkpoint, then moves the lane's head to it with compare-and-set: when the
   * config names the checkpoint this step resumed from and the head is no longer that one,
   * another worker wrote the next step first and this put throws ThreadConflictError.
   */
  async put(config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata, newVersions: ChannelVersions): Promise<RunnableConfig> {
    const c = (config.configurable ?? {}) as Configurable;
    const thread = c.thread_id;
    if (thread === undefined) throw new Error('KslateSaver.put: the config has no configurable.thread_id.');
    const ns = c.checkpoint_ns ?? '';
    const parent = c.checkpoint_id;
    const gen = (await this.generation(thread)).value;
    const lane = await this.rec('l', [this.prefix, thread, gen, ns]);

    const copy = copyCheckpoint(checkpoint);
    const values = copy.channel_values ?? {};
    const parentDoc = parent ? (await this.doc(thread, gen, ns, parent))?.doc : undefined;
    const refs: Record<string, string> = { ...(parentDoc?.refs ?? {}) };
    const blobs: Record<string, Blob> = {};
    for (const ch of Object.keys(newVersions)) {
      if (ch in values && values[ch] !== undefined) {
        blobs[ch] = toBlob(await this.serde.dumpsTyped(values[ch]));
        refs[ch] = copy.id;
      } else delete refs[ch];
    }
    const doc: Doc = {
      checkpoint: toBlob(await this.serde.dumpsTyped({ ...copy, channel_values: {} })),
      metadata: toBlob(await this.serde.dumpsTyped(metadata)),
      parent: parent ?? null,
      blobs,
      refs,
    };
    const cp = await this.rec('c', [this.prefix, thread, gen, ns, copy.id]);
    // A new checkpoint id: the record does not exist yet (expected_version 0, no read first).
    await cp.put('doc', doc, { expectedVersion: 0 }).catch((e) => {
      if (!(e instanceof StaleError)) throw e;
      return cp.put('doc', doc, { expectedVersion: e.currentVersion });
    });

    // The compare-and-set of the thread: from the parent to this checkpoint. When this saver
    // saw the version at which the parent became the head (it loaded or wrote it), the write
    // names that version, so a refused step is a STALE row in the lane's history too.
    let created = false;
    let headVersion: number;
    const known = parent ? this.heads.get(headKey(thread, gen, ns, parent)) : undefined;
    if (known !== undefined) {
      try {
        headVersion = (await lane.put('head', copy.id, { expectedVersion: known })).version;
      } catch (e) {
        if (!(e instanceof StaleError)) throw e;
        if (e.currentValue !== copy.id) throw new ThreadConflictError(thread, ns, parent!, String(e.currentValue), e.currentAuthor ?? undefined);
        headVersion = e.currentVersion; // our own write, answered STALE on its retry
      }
    } else {
      try {
        const res = await lane.update<string>(
          'head',
          (head, version) => {
            created = version === 0;
            if (parent && head !== undefined && head !== parent && head !== copy.id) throw new ThreadConflictError(thread, ns, parent, head);
            return copy.id;
          },
          { retries: 20 },
        );
        headVersion = res.version;
      } catch (e) {
        if (e instanceof ThreadConflictError) {
          const author = await lane
            .get({ fields: ['head'] })
            .then((r) => (r.fields.head as { author?: string }).author)
            .catch(() => undefined);
          throw new ThreadConflictError(e.threadId, e.checkpointNs, e.expectedParent, e.currentHead, author);
        }
        throw e;
      }
    }
    this.rememberHead(thread, gen, ns, copy.id, headVersion);
    const evidence = 'LangGraph checkpoint (KslateSaver)';
    await lane.append('log', copy.id, { evidence });
    if (created) {
      const t = await this.rec('t', [this.prefix, thread]);
      const known = await this.entries<string>(t, 'lanes');
      if (!known.includes(`${gen}:${ns}`)) {
        await t.append('lanes', `${gen}:${ns}`, { evidence });
        if (known.length === 0) await (await this.rec('i', [this.prefix])).append('threads', thread, { evidence });
      }
    }
    return { configurable: { thread_id: thread, checkpoint_ns: ns, checkpoint_id: copy.id } };
  }

  async putWrites(config: RunnableConfig, writes: PendingWrite[], taskId: string, taskPath?: string): Promise<void> {
    const c = (config.configurable ?? {}) as Configurable;
    if (c.thread_id === undefined) throw new Error('KslateSaver.putWrites: the config has no configurable.thread_id.');
    if (c.checkpoint_id === undefined) throw new Error('KslateSaver.putWrites: the config has no configurable.checkpoint_id.');
    const gen = (await this.generation(c.thread_id)).value;
    const entry: WriteEntry = {
      task_id: taskId,
      task_path: taskPath ?? '',
      writes: await Promise.all(
        writes.map(async ([channel, value], idx) => ({
          idx: (WRITES_IDX_MAP as Record<string, number>)[channel] ?? idx,
          channel,
          value: toBlob(await this.serde.dumpsTyped(value)),
        })),
      ),
    };
    const cp = await this.rec('c', [this.prefix, c.thread_id, gen, c.checkpoint_ns ?? '', c.checkpoint_id]);
    await cp.append('writes', entry as unknown as Record<string, unknown>, { evidence: `LangGraph pending writes of task ${taskId} (KslateSaver)` });
  }

  /** Starts a new generation of the thread: its checkpoints become unreachable (their records and history stay). */
  async deleteThread(threadId: string): Promise<void> {
    const t = await this.rec('t', [this.prefix, threadId]);
    for (let n = 0; ; n++) {
      const g = await this.generation(threadId);
      if (g.version === 0 && (await this.entries<string>(t, 'lanes')).length === 0) return;
      try {
        await t.put('generation', g.value + 1, { expectedVersion: g.version });
        return;
      } catch (e) {
        if (!(e instanceof StaleError) || n > 20) throw e;
      }
    }
  }
}

export { KslateError };
