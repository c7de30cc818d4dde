/**
 * What grpcurl, grpcui and Kubernetes gRPC probes expect of a gRPC server (issue 10, part 16):
 * the standard health service grpc.health.v1.Health and server reflection, both without a
 * credential. Real grpc-js clients built from the protos the packages ship.
 */
import { dirname, resolve } from 'node:path';
import { createRequire } from 'node:module';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { incident } from '../fixtures/classes.js';
import { startTestGateway, type TestGateway } from '../setup/gateway.js';
import { freePort } from '../setup/ports.js';
import { reflect } from './reflection.js';

const require = createRequire(import.meta.url);
const healthProto = require('grpc-health-check').protoPath as string;

const loaded = protoLoader.loadSync(['health/v1/health.proto'], {
  keepCase: true,
  longs: String,
  enums: String,
  defaults: true,
  oneofs: true,
  includeDirs: [resolve(dirname(healthProto), '../..')],
});
const pkg = grpc.loadPackageDefinition(loaded) as any;

type Health = grpc.Client & {
  Check(req: { service: string }, cb: (e: grpc.ServiceError | null, r?: { status: string }) => void): void;
  Watch(req: { service: string }): grpc.ClientReadableStream<{ status: string }>;
};

const check = (c: Health, service: string) =>
  new Promise<{ status?: string; code?: number }>((res) =>
    c.Check({ service }, (e, r) => res(e ? { code: e.code } : { status: r!.status })),
  );

let t: TestGateway;
let address: string;
let health: Health;
beforeAll(async () => {
  t = await startTestGateway([incident], { extraArgs: ['--grpc-port', String(await freePort())] });
  address = `127.0.0.1:${t.gw.grpcPort}`;
  health = new pkg.grpc.health.v1.Health(address, grpc.credentials.createInsecure());
});
afterAll(async () => {
  health?.close();
  await t?.close();
});

describe('grpc.health.v1.Health', () => {
  it('Check answers SERVING for the server ("") and for svc.v1.SvcService, with no credential', async () => {
    expect(await check(health, '')).toEqual({ status: 'SERVING' });
    expect(await check(health, 'svc.v1.SvcService')).toEqual({ status: 'SERVING' });
  });

  it('Check of a service the server does not have is NOT_FOUND', async () => {
    expect(await check(health, 'no.such.Service')).toEqual({ code: grpc.status.NOT_FOUND });
  });
});

describe('server reflection', () => {
  it('list_services names svc.v1.SvcService, the health service and reflection itself', async () => {
    const r = await reflect(address, { list_services: '' });
    const names = r.list_services_response.service.map((s: { name: string }) => s.name);
    expect(names).toEqual(expect.arrayContaining(['svc.v1.SvcService', 'grpc.health.v1.Health', 'grpc.reflection.v1.ServerReflection']));
  });

  it('file_containing_symbol returns the descriptors grpcurl needs to call svc.v1.SvcService', async () => {
    const r = await reflect(address, { file_containing_symbol: 'svc.v1.SvcService' });
    expect(r.error_response ?? null).toBeNull();
    const files: Buffer[] = r.file_descriptor_response.file_descriptor_proto;
    expect(files.length).toBeGreaterThan(0);
    expect(Buffer.concat(files).toString('latin1')).toContain('SvcService');
  });
});

describe('health follows the database and the shutdown', () => {
  it('NOT_SERVING when the database is unreachable, with no credential', async () => {
    const deadDb = { url: `postgres://kslate@127.0.0.1:${await freePort()}/none`, name: 'none', drop: async () => undefined };
    const down = await startTestGateway([incident], { db: deadDb, extraArgs: ['--grpc-port', String(await freePort())] });
    const c: Health = new pkg.grpc.health.v1.Health(`127.0.0.1:${down.gw.grpcPort}`, grpc.credentials.createInsecure());
    try {
      expect(await check(c, '')).toEqual({ status: 'NOT_SERVING' });
      expect(await check(c, 'svc.v1.SvcService')).toEqual({ status: 'NOT_SERVING' });
    } finally {
      c.close();
      await down.close();
    }
  });

  it('a Watch sees NOT_SERVING when the gateway closes', async () => {
    const g = await startTestGateway([incident], { db: t.db, extraArgs: ['--grpc-port', String(await freePort())] });
    const c: Health = new pkg.grpc.health.v1.Health(`127.0.0.1:${g.gw.grpcPort}`, grpc.credentials.createInsecure());
    const seen: string[] = [];
    const stream = c.Watch({ service: '' });
    stream.on('error', () => undefined);
    // The first answer may be NOT_SERVING if it comes before the first readiness check.
    const notServing = new Promise<void>((res) =>
      stream.on('data', (m) => {
        seen.push(m.status);
        if (m.status === 'NOT_SERVING' && seen.includes('SERVING')) res();
      }),
    );
    await new Promise<void>((res) => {
      const wait = () => (seen.includes('SERVING') ? res() : setTimeout(wait, 20));
      wait();
    });
    const closing = g.close();
    await notServing;
    stream.cancel();
    c.close();
    await closing;
    expect(seen.slice(seen.indexOf('SERVING'))).toEqual(['SERVING', 'NOT_SERVING']);
  });
});
