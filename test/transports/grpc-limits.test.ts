/**
 * gRPC request messages over the limit (issue 10): every size is INVALID_ARGUMENT with the
 * MALFORMED body in grpc-status-details-bin, like every other MALFORMED on gRPC; never
 * grpc-js's own RESOURCE_EXHAUSTED, which the spec keeps for rate limiting.
 */
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { incident } from '../fixtures/classes.js';
import { KEYS, startTestGateway, type TestGateway } from '../setup/gateway.js';
import { freePort } from '../setup/ports.js';
import { grpcErrorBody, toValue } from './clients.js';
import type { ProtoGrpcType } from '../../runtime/grpc/generated/svc.js';
import type { SvcServiceClient } from '../../runtime/grpc/generated/svc/v1/SvcService.js';
import { loadSvcProto } from '../../runtime/grpc/proto.js';

const MIB = 1024 * 1024;
const proto = grpc.loadPackageDefinition(loadSvcProto()) as unknown as ProtoGrpcType;

let t: TestGateway;
let client: SvcServiceClient;
beforeAll(async () => {
  t = await startTestGateway([incident], { extraArgs: ['--grpc-port', String(await freePort())] });
  client = new proto.svc.v1.SvcService(`127.0.0.1:${t.gw.grpcPort}`, grpc.credentials.createInsecure(), {
    'grpc.max_send_message_length': -1,
  });
});
afterAll(async () => {
  client?.close();
  await t?.close();
});

let seq = 0;
const fresh = () => `lim-${++seq}`;

function call(method: 'Get' | 'Put', req: object, who: string | null = 'alice'): Promise<{ err?: grpc.ServiceError; res?: any }> {
  const md = new grpc.Metadata();
  if (who) md.set('authorization', `Bearer ${KEYS[who]}`);
  return new Promise((resolve) =>
    (client[method] as unknown as (r: object, m: grpc.Metadata, cb: (e: grpc.ServiceError | null, r?: unknown) => void) => void).call(
      client,
      req,
      md,
      (err, res) => resolve(err ? { err } : { res }),
    ),
  );
}

function rejected(r: { err?: grpc.ServiceError }, code: grpc.status, error: string): Record<string, unknown> {
  expect(r.err, 'expected an error').toBeDefined();
  expect(`${grpc.status[r.err!.code]}: ${r.err!.details}`).toMatch(new RegExp(`^${grpc.status[code]}: `));
  const body = grpcErrorBody(r.err!);
  expect(body).toMatchObject({ error });
  return body;
}

describe('gRPC request messages over 4 MiB', () => {
  it.each([6, 20])('a %i MiB Put is INVALID_ARGUMENT with the MALFORMED body, not RESOURCE_EXHAUSTED', async (mib) => {
    const r = await call('Put', { record: `incident/${fresh()}`, field: 'blob', value: toValue('x'.repeat(mib * MIB)), expected_version: 0 });
    const body = rejected(r, grpc.status.INVALID_ARGUMENT, 'MALFORMED');
    expect(body.message).toMatch(/4 MiB/);
  });

  it('a 20 MiB Get is INVALID_ARGUMENT with the MALFORMED body', async () => {
    const r = await call('Get', { record: `incident/${fresh()}`, fields: ['f'.repeat(20 * MIB)] });
    rejected(r, grpc.status.INVALID_ARGUMENT, 'MALFORMED');
  });

  it('credentials are still checked first: a 20 MiB message without one is UNAUTHENTICATED', async () => {
    const r = await call('Put', { record: `incident/${fresh()}`, field: 'blob', value: toValue('x'.repeat(20 * MIB)), expected_version: 0 }, null);
    rejected(r, grpc.status.UNAUTHENTICATED, 'UNAUTHENTICATED');
  });

  it('the channel keeps working after several oversized messages', async () => {
    for (let i = 0; i < 5; i++) {
      const r = await call('Put', { record: `incident/${fresh()}`, field: 'blob', value: toValue('y'.repeat(20 * MIB)), expected_version: 0 });
      rejected(r, grpc.status.INVALID_ARGUMENT, 'MALFORMED');
    }
    const id = fresh();
    const ok = await call('Put', { record: `incident/${id}`, field: 'title', value: toValue('fine'), expected_version: 0 });
    expect(ok.err).toBeUndefined();
    expect(ok.res).toMatchObject({ record: `incident/${id}`, version: 1 });
  });
});
