/**
 * What a driver error means for the caller (db/errors.ts): nothing sent (retry), the
 * connection lost under a statement (a write may have been applied), the budget spent.
 */
import { createServer } from 'node:net';
import { describe, expect, it } from 'vitest';
import { createPool, PgDb } from '../../db/kysely/index.js';
import { classifyDbError, discardsConnection } from '../../db/errors.js';
import { StorageFault } from '../../db/port.js';
import { storageFaultError } from '../../handlers/index.js';

const err = (message: string, extra: Record<string, unknown> = {}) => Object.assign(new Error(message), extra);

describe('classifyDbError', () => {
  it.each([
    ['connect ECONNREFUSED 127.0.0.1:5432', { code: 'ECONNREFUSED', syscall: 'connect' }],
    ['connect ETIMEDOUT 10.0.0.1:5432', { code: 'ETIMEDOUT', syscall: 'connect' }],
    ['getaddrinfo ENOTFOUND db', { code: 'ENOTFOUND', syscall: 'getaddrinfo' }],
    ['the database system is starting up', { code: '57P03' }],
    ['sorry, too many clients already', { code: '53300' }],
    ['timeout exceeded when trying to connect', {}],
    ['Connection terminated due to connection timeout', {}],
    ['Client has encountered a connection error and is not queryable', {}],
    // A standby refused the statement, or the pool refused a new connection to one (db/kysely/primary.ts).
    ['cannot execute INSERT in a read-only transaction', { code: '25006' }],
    ['could not check the new database connection: Connection terminated unexpectedly', { code: '08001' }],
  ])('nothing was sent: %s is unreachable', (message, extra) => {
    expect(classifyDbError(err(message, extra))).toBe('unreachable');
  });

  it.each([
    ['terminating connection due to administrator command', { code: '57P01' }],
    ['read ECONNRESET', { code: 'ECONNRESET', syscall: 'read' }],
    ['write EPIPE', { code: 'EPIPE', syscall: 'write' }],
    ['connection failure', { code: '08006' }],
    ['Connection terminated unexpectedly', {}],
    ['Connection ended unexpectedly', {}],
    // pg's client-side query_timeout: sent, never answered; a commit waiting for its
    // synchronous standby still completes once the client is gone.
    ['Query read timeout', {}],
    // Citus: a write delegated to a shard's old node during a shard move's switch-over
    // (test/citus/rebalance.test.ts saw it as 500 INTERNAL).
    ['cannot execute a distributed query from a query on a shard', { code: 'XX000' }],
  ])('a statement may have been in flight: %s is lost', (message, extra) => {
    expect(classifyDbError(err(message, extra))).toBe('lost');
  });

  it('the budget and the schema keep their own kinds; anything else is a fault', () => {
    expect(classifyDbError(err('canceling statement due to statement timeout', { code: '57014' }))).toBe('timeout');
    expect(classifyDbError(err('relation "records" does not exist', { code: '42P01' }))).toBe('schema');
    expect(classifyDbError(err('boom'))).toBeNull();
  });
});

describe('what the caller is told', () => {
  it('a lost connection: 503 UNAVAILABLE with "outcome": "unknown", so a client can tell without reading the message', () => {
    const e = storageFaultError(new StorageFault('lost', err('Connection terminated unexpectedly')));
    expect(e.status).toBe(503);
    expect(e.body()).toMatchObject({ error: 'UNAVAILABLE', outcome: 'unknown' });
  });

  it('nothing sent, or cancelled by the server: no outcome key (the write did not happen)', () => {
    for (const kind of ['unreachable', 'timeout', 'schema'] as const) {
      expect(storageFaultError(new StorageFault(kind, err('x'))).body()).not.toHaveProperty('outcome');
    }
  });
});

describe('discardsConnection', () => {
  it('a client-side timeout and a read-only refusal end the pooled connection; other errors keep it', () => {
    expect(discardsConnection(err('Query read timeout'))).toBe(true);
    expect(discardsConnection(err('cannot execute UPDATE in a read-only transaction', { code: '25006' }))).toBe(true);
    expect(discardsConnection(err('duplicate key value violates unique constraint', { code: '23505' }))).toBe(false);
    expect(discardsConnection(err('canceling statement due to statement timeout', { code: '57014' }))).toBe(false);
    expect(discardsConnection(null)).toBe(false);
  });
});

describe('a connection that could not be made', () => {
  it('a proxy with no server behind it (accepts, then closes: HAProxy during a failover) is unreachable, not lost', async () => {
    // pg says "Connection terminated unexpectedly", as for a connection lost under a query,
    // but nothing of the request was sent.
    const proxy = createServer((socket) => socket.destroy());
    await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
    const port = (proxy.address() as { port: number }).port;
    const db = new PgDb(createPool({ connectionString: `postgres://kslate@127.0.0.1:${port}/kslate`, max: 1 }));
    try {
      await expect(db.listClasses()).rejects.toMatchObject({ name: 'StorageFault', kind: 'unreachable', cause: { message: 'Connection terminated unexpectedly' } });
    } finally {
      await db.kysely.destroy();
      await new Promise((r) => proxy.close(r));
    }
  });
});
