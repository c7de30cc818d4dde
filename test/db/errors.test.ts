/**
 * What a driver error means for the caller (db/errors.ts): nothing sent (retry), the
 * connection lost under a statement (a write may have been applied), the budget spent.
 */
import { describe, expect, it } from 'vitest';
import { classifyDbError } from '../../db/errors.js';

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
  ])('a statement may have been in flight: %s is lost', (message, extra) => {
    expect(classifyDbError(err(message, extra))).toBe('lost');
  });

  it('the budget and the schema keep their own kinds; anything else is a fault', () => {
    expect(classifyDbError(err('canceling statement due to statement timeout', { code: '57014' }))).toBe('timeout');
    expect(classifyDbError(err('Query read timeout'))).toBe('timeout');
    expect(classifyDbError(err('relation "records" does not exist', { code: '42P01' }))).toBe('schema');
    expect(classifyDbError(err('boom'))).toBeNull();
  });
});
