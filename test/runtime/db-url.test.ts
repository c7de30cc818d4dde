/**
 * The clear-text database warning (issue 31, 7f): a URL to another host without sslmode=require
 * or stronger is warned about at start; loopback, sockets and TLS URLs are not.
 */
import { describe, expect, test } from 'vitest';
import { COMMAND_DEFAULTS, parseConfig } from '../../runtime/config.js';
import { plaintextDatabaseWarning } from '../../runtime/db-url.js';
import { createServices } from '../../runtime/services.js';
import { startWorker } from '../../runtime/worker.js';

describe('plaintextDatabaseWarning', () => {
  test.each([
    'postgres://u:p@db.example.com:5432/kslate',
    'postgresql://u:p@db.example.com/kslate?sslmode=disable',
    'postgres://u:p@db.example.com/kslate?sslmode=prefer',
    'postgres://u:p@db.example.com/kslate?sslmode=allow',
    'postgres://u:p@10.0.0.5/kslate',
    'postgres://u:p@[2001:db8::1]:5432/kslate',
    'postgres://u:p@kslate-postgres.kslate.svc:5432/kslate?sslmode=disable',
    'postgres://u:p@db.example.com/kslate?ssl=false',
    'postgres://u:p@127.0.0.1/kslate?host=db.example.com',
  ])('%s is warned about, naming the host and never the password', (url) => {
    const w = plaintextDatabaseWarning(url);
    expect(w).toMatch(/^the database connection to \S+ is not encrypted \((sslmode=\w+|no sslmode)\): .*add sslmode=require/);
    expect(w).not.toContain(':p@');
    expect(w).not.toMatch(/\bp\b/);
  });

  test.each([
    'postgres://u:p@db.example.com/kslate?sslmode=require',
    'postgres://u:p@db.example.com/kslate?sslmode=verify-ca',
    'postgres://u:p@db.example.com/kslate?sslmode=verify-full&sslrootcert=/ca.pem',
    'postgres://u:p@db.example.com/kslate?sslmode=no-verify',
    'postgres://u:p@db.example.com/kslate?ssl=true',
    'postgres://u:p@db.example.com/kslate?sslnegotiation=direct',
    'postgres://u:p@127.0.0.1:5432/kslate',
    'postgres://u:p@127.4.5.6/kslate',
    'postgres://u:p@localhost/kslate',
    'postgres://u:p@LOCALHOST./kslate',
    'postgres://u:p@[::1]:5432/kslate',
    'postgres:///kslate?host=/var/run/postgresql',
    'postgres://u@%2Fvar%2Frun%2Fpostgresql/kslate',
    'host=db.example.com dbname=kslate',
    'not a url',
  ])('%s is not', (url) => {
    expect(plaintextDatabaseWarning(url)).toBeNull();
  });

  test('the host is named as written, an explicit sslmode as given', () => {
    expect(plaintextDatabaseWarning('postgres://u:p@db.example.com/k?sslmode=prefer')).toContain('to db.example.com is not encrypted (sslmode=prefer)');
    expect(plaintextDatabaseWarning('postgres://u:p@[2001:db8::1]/k')).toContain('to 2001:db8::1 is not encrypted (no sslmode)');
  });
});

describe('logged at start', () => {
  const capture = () => {
    const warned: string[] = [];
    const log = { debug() {}, info() {}, warn: (m: string) => void warned.push(m), error() {} };
    return { log, warned };
  };
  // db.invalid never resolves (RFC 6761): nothing here reaches a database.
  const url = 'postgres://kslate:secret@db.invalid:5432/kslate';

  test('by the gateway (serve, dev with --database-url)', async () => {
    const { log, warned } = capture();
    const cfg = parseConfig(['--database-url', url, '--identity', 'apikey', '--apikeys', 'examples/apikeys.yaml'], {});
    const services = await createServices(cfg, log);
    try {
      expect(warned.filter((w) => w.startsWith('the database connection to db.invalid is not encrypted (no sslmode)'))).toHaveLength(1);
    } finally {
      await services.close(1_000);
    }
    const quiet = capture();
    const tls = await createServices(parseConfig(['--database-url', `${url}?sslmode=require`, '--identity', 'apikey', '--apikeys', 'examples/apikeys.yaml'], {}), quiet.log);
    await tls.close(1_000);
    expect(quiet.warned.filter((w) => w.includes('not encrypted'))).toEqual([]);
  });

  test('by the worker', async () => {
    const { log, warned } = capture();
    const cfg = parseConfig(['--database-url', url, '--health-port', '0', '--metrics-port', '0'], {}, COMMAND_DEFAULTS.worker);
    const w = await startWorker(cfg, log, null);
    try {
      expect(warned.filter((m) => m.startsWith('the database connection to db.invalid is not encrypted'))).toHaveLength(1);
    } finally {
      await w.shutdown();
    }
  });
});
