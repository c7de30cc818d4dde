/**
 * A consumer of @kslate/client touching every method, type-checked with `tsc --noEmit` and no
 * Node types (tsconfig.json beside it) by test/client/consumer.test.ts; never run.
 */
import {
  kslate,
  HeldError,
  KslateError,
  ScopeDeniedError,
  StaleError,
  StalePremiseError,
  type ClaimResult,
  type PutResult,
  type RecordData,
  type WatchChange,
} from '@kslate/client';

export async function everyMethod(signal: AbortSignal): Promise<void> {
  const k = kslate({ url: 'https://kslate.example', getToken: async () => 'token' });
  const k2 = kslate({ url: 'https://kslate.example', token: 'token', retry: { attempts: 3, baseDelayMs: 50 }, headers: { 'X-Svc-Scope': 'run-1' } });
  void k2;
  const incidents = k.records('incident');
  const rec: RecordData = await incidents.get('db-1', { fields: ['title'], entriesLimit: 5, signal });
  const version: number = rec.record_version;
  const page = await incidents.query({ status: 'open', severity: 2 }, { limit: 10, after: undefined, signal });
  const next: string | undefined = page.next_after;
  for await (const r of incidents.scan({ status: 'open' })) void r.record;
  const h = await incidents.history('db-1', { field: 'title', limit: 10, before: next });
  void h.history[0]?.outcome;
  for await (const c of incidents.watch({ from: 'cursor', signal })) {
    const change: WatchChange = c;
    void change.id;
  }

  const r = k.record('incident', 'db-1');
  const put: PutResult = await r.put('title', 'x', { expectedVersion: version, evidence: 'e', basedOn: [{ field: 'status', version: 1 }], invocation: { run: 'r' }, signal });
  void put.version;
  await r.put('scratch', { any: 1 }, { idempotencyKey: 'k-1', dryRun: true });
  const app = await r.append('notes', { text: 'n' }, { evidence: 'e' });
  void app.seq;
  const claim: ClaimResult = await r.claim('triage', { leaseSeconds: 60, renew: true });
  void claim.owner;
  await r.release('triage');
  const saved = await r.checkpoint({ summary: 's', next_steps: [] });
  void saved.checkpoint_id;
  const loaded = await r.loadCheckpoint({ role: 'responder' });
  void loaded.changed_fields;
  const tx = await r.transaction([
    { op: 'put', field: 'status', value: 'open', expected_version: 1 },
    { op: 'append', field: 'notes', entry: {}, evidence: 'e' },
    { op: 'claim', field: 'triage', lease_seconds: 30 },
  ]);
  void tx.record_version;
  const u = await r.update<number>('severity', (n) => (n ?? 0) + 1, { retries: 5, signal });
  const nv: number = u.value;
  void nv;
  {
    await using lease = await r.lease('triage', { seconds: 30, renewFraction: 0.5, onRenew: (c) => void c.lease_expires_at });
    lease.signal.addEventListener('abort', () => void lease.signal.reason);
    void lease.version;
  }
  for await (const c of r.watch({ fromRecordVersion: 0, signal, onReconnect: (i) => void i.reason, onOpen: (i) => void i.lastEventId })) void c.record_version;
  await k.classes();
  await k.class('incident');
  await r.find();

  try {
    await r.put('title', 'y', { expectedVersion: 1 });
  } catch (e) {
    if (e instanceof StaleError) {
      const cur: unknown = e.currentValue;
      const d: string = e.diff;
      const v: number = e.currentVersion;
      void [cur, d, v];
    } else if (e instanceof StalePremiseError) void e.moved;
    else if (e instanceof HeldError) void e.owner.toUpperCase();
    else if (e instanceof ScopeDeniedError) void e.field;
    else if (e instanceof KslateError) void [e.code, e.status, e.body];
  }
  // @ts-expect-error a field version is a number
  const wrong: string = put.version;
  void wrong;
  // @ts-expect-error records() needs a class name
  k.records();
}
