/**
 * KslateStore: LangGraph's long-term memory (BaseStore) on kslate records. One record per
 * item (id from the store prefix, namespace and key): field `item` holds
 * `{namespace, key, value, created_at, updated_at}` (value null once deleted: the record and
 * its history stay), field `store` the prefix, so search and listNamespaces query by it.
 * Writes are compare-and-set (update), so two writers of one item never lose an update
 * silently; filters are applied by the client (exact values and $eq/$ne/$gt/$gte/$lt/$lte).
 * Semantic search (`query`) needs embeddings, which this store does not keep: a search with a
 * query returns the filtered items unranked.
 */
import { BaseStore, validateNamespace, type GetOperation, type Item, type ListNamespacesOperation, type Operation, type OperationResults, type PutOperation, type SearchItem, type SearchOperation, type MatchCondition } from '@langchain/langgraph-checkpoint';
import type { KslateClient } from '@kslate/client';
import { connect, recordId, type Connection } from './codec.js';

export const DEFAULT_STORE_CLASS = 'langgraph-store';

interface Stored {
  namespace: string[];
  key: string;
  value: Record<string, unknown> | null;
  created_at: string;
  updated_at: string;
}

export interface KslateStoreOptions extends Connection {}

function compare(actual: unknown, cond: unknown): boolean {
  if (cond && typeof cond === 'object' && !Array.isArray(cond) && Object.keys(cond).some((k) => k.startsWith('$'))) {
    return Object.entries(cond as Record<string, unknown>).every(([op, v]) => {
      switch (op) {
        case '$eq':
          return equal(actual, v);
        case '$ne':
          return !equal(actual, v);
        case '$gt':
          return (actual as number) > (v as number);
        case '$gte':
          return (actual as number) >= (v as number);
        case '$lt':
          return (actual as number) < (v as number);
        case '$lte':
          return (actual as number) <= (v as number);
        default:
          throw new Error(`KslateStore: unsupported filter operator ${op}`);
      }
    });
  }
  return equal(actual, cond);
}

function equal(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (a && b && typeof a === 'object' && typeof b === 'object') return JSON.stringify(a) === JSON.stringify(b);
  return false;
}

function matches(cond: MatchCondition, ns: string[]): boolean {
  const { matchType, path } = cond;
  if (path.length > ns.length) return false;
  const offset = matchType === 'suffix' ? ns.length - path.length : 0;
  return path.every((p, i) => p === '*' || ns[offset + i] === p);
}

const toItem = (s: Stored): Item => ({
  namespace: s.namespace,
  key: s.key,
  value: s.value as Record<string, unknown>,
  createdAt: new Date(s.created_at),
  updatedAt: new Date(s.updated_at),
});

export class KslateStore extends BaseStore {
  readonly client: KslateClient;
  readonly className: string;
  readonly prefix: string;

  constructor(opts: KslateStoreOptions) {
    super();
    this.client = connect(opts);
    this.className = opts.className ?? DEFAULT_STORE_CLASS;
    this.prefix = opts.prefix ?? 'default';
  }

  private async handle(namespace: string[], key: string) {
    return this.client.record(this.className, await recordId('s', [this.prefix, ...namespace, '\u0000', key]));
  }

  /** Every live item of this store (query by the `store` field, page by page). */
  private async all(): Promise<Stored[]> {
    const out: Stored[] = [];
    for await (const r of this.client.records(this.className).scan({ store: this.prefix }, { limit: 1000 })) {
      const s = (r.fields.item as { value?: Stored } | undefined)?.value;
      if (s && s.value !== null) out.push(s);
    }
    return out;
  }

  async batch<Op extends Operation[]>(operations: Op): Promise<OperationResults<Op>> {
    const results: unknown[] = [];
    let cache: Stored[] | undefined;
    const items = async () => (cache ??= await this.all());
    for (const op of operations) {
      if ('namespacePrefix' in op) results.push(await this.search_(op as SearchOperation, await items()));
      else if ('value' in op) {
        await this.put_(op as PutOperation);
        cache = undefined;
        results.push(undefined);
      } else if ('key' in op) results.push(await this.get_(op as GetOperation));
      else results.push(this.listNamespaces_(op as ListNamespacesOperation, await items()));
    }
    return results as OperationResults<Op>;
  }

  private async get_(op: GetOperation): Promise<Item | null> {
    const r = await (await this.handle(op.namespace, op.key)).find({ fields: ['item'] });
    const s = (r?.fields.item as { value?: Stored } | undefined)?.value;
    return s && s.value !== null ? toItem(s) : null;
  }

  private async put_(op: PutOperation): Promise<void> {
    if (op.value !== null) validateNamespace(op.namespace);
    const h = await this.handle(op.namespace, op.key);
    let created = false;
    const nothingToDelete = new Error('nothing to delete');
    await h.update<Stored | null>(
      'item',
      (cur, version) => {
        created = version === 0;
        const now = new Date().toISOString();
        if (op.value === null) {
          // Deleting what is not there (or already deleted) writes nothing.
          if (!cur || cur.value === null) throw nothingToDelete;
          return { ...cur, value: null, updated_at: now };
        }
        // A deleted item written again starts a new life.
        const createdAt = cur && cur.value !== null ? cur.created_at : now;
        return { namespace: op.namespace, key: op.key, value: op.value, created_at: createdAt, updated_at: now };
      },
      { retries: 20 },
    ).catch((e) => {
      if (e !== nothingToDelete) throw e;
    });
    if (created && op.value !== null) await h.put('store', this.prefix, { expectedVersion: 0 }).catch(() => undefined);
  }

  private search_(op: SearchOperation, all: Stored[]): SearchItem[] {
    const prefix = op.namespacePrefix;
    let found = all.filter((s) => prefix.every((p, i) => s.namespace[i] === p));
    if (op.filter) found = found.filter((s) => Object.entries(op.filter!).every(([k, v]) => compare((s.value as Record<string, unknown>)[k], v)));
    // Newest first, as the Postgres store answers without a query.
    found.sort((a, b) => (a.updated_at < b.updated_at ? 1 : a.updated_at > b.updated_at ? -1 : 0));
    const offset = op.offset ?? 0;
    return found.slice(offset, offset + (op.limit ?? 10)).map((s) => ({ ...toItem(s), score: undefined }));
  }

  private listNamespaces_(op: ListNamespacesOperation, all: Stored[]): string[][] {
    let nss = all.map((s) => s.namespace);
    if (op.matchConditions?.length) nss = nss.filter((ns) => op.matchConditions!.every((c) => matches(c, ns)));
    if (op.maxDepth !== undefined) nss = nss.map((ns) => ns.slice(0, op.maxDepth));
    const unique = [...new Map(nss.map((ns) => [JSON.stringify(ns), ns])).values()];
    unique.sort((a, b) => a.join(':').localeCompare(b.join(':')));
    return unique.slice(op.offset ?? 0, (op.offset ?? 0) + (op.limit ?? unique.length));
  }
}
