/**
 * Fuzz over gRPC (issue 10): the same seeded cases as request messages (those a protobuf
 * message can carry), plus raw random bytes as messages. No INTERNAL, UNKNOWN or
 * UNAVAILABLE status and no dropped connection.
 */
import fc from 'fast-check';
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { KEYS, type TestGateway } from '../setup/gateway.js';
import { grpcRequest, NotExpressible } from '../transports/clients.js';
import { loadSvcProto } from '../../runtime/grpc/proto.js';
import { OPS, RUNS, SEED, opCases, runAll, show } from './cases.js';
import { fuzzGateway, tally, whoFor } from './setup.js';

let t: TestGateway;
let client: grpc.Client;
let raw: grpc.Client;
const definition = loadSvcProto();
const service = definition['svc.v1.SvcService'] as Record<string, { path: string; requestSerialize(v: object): Buffer; responseDeserialize(b: Buffer): unknown }>;

beforeAll(async () => {
  t = await fuzzGateway();
  const address = `127.0.0.1:${t.gw.grpcPort}`;
  client = new grpc.Client(address, grpc.credentials.createInsecure(), { 'grpc.max_receive_message_length': -1 });
  raw = new grpc.Client(address, grpc.credentials.createInsecure(), { 'grpc.max_receive_message_length': -1 });
});
afterAll(async () => {
  client?.close();
  raw?.close();
  await t?.close();
});

const BAD = new Set([grpc.status.INTERNAL, grpc.status.UNKNOWN, grpc.status.UNAVAILABLE, grpc.status.CANCELLED, grpc.status.DEADLINE_EXCEEDED]);

function call(c: grpc.Client, path: string, msg: Buffer, who: string): Promise<grpc.ServiceError | null> {
  const md = new grpc.Metadata();
  md.set('authorization', `Bearer ${KEYS[who] ?? who}`);
  return new Promise((resolve) =>
    c.makeUnaryRequest(path, (b: Buffer) => b, (b: Buffer) => b, msg, md, { deadline: Date.now() + 20_000 }, (err) => resolve(err ?? null)),
  );
}

const METHOD: Record<string, string> = { get: 'Get', put: 'Put', append: 'Append', claim: 'Claim', checkpointSave: 'CheckpointSave', checkpointLoad: 'CheckpointLoad', query: 'Query' };

it.each(OPS)('%s: no INTERNAL/UNKNOWN/UNAVAILABLE and no dropped connection', async (op) => {
  const cases = opCases(op);
  const seen = tally();
  let skipped = 0;
  const m = service[METHOD[op]];
  const failures = await runAll(cases, 8, async (args, i) => {
    let msg: Buffer;
    try {
      const { req } = grpcRequest(op, args);
      msg = m.requestSerialize(req);
    } catch (e) {
      // What no protobuf message can carry (a value nested past protobuf's limit, a
      // non-string where the proto has a string) cannot be sent: nothing to test.
      if (e instanceof NotExpressible || e instanceof Error) {
        skipped++;
        return null;
      }
      throw e;
    }
    const err = await call(client, m.path, msg, whoFor(i));
    seen.add(err ? grpc.status[err.code] : 'OK');
    return err && BAD.has(err.code) ? `${grpc.status[err.code]} (${err.details}) for ${show(args)}` : null;
  });
  // Random bytes as the request message.
  const junk = fc.sample(fc.uint8Array({ maxLength: 200 }), { seed: SEED + 100, numRuns: Math.ceil(RUNS / 10) });
  const rawFailures = await runAll(junk, 8, async (bytes, i) => {
    const err = await call(raw, m.path, Buffer.from(bytes), whoFor(i));
    seen.add(err ? `raw:${grpc.status[err.code]}` : 'raw:OK');
    return err && BAD.has(err.code) ? `${grpc.status[err.code]} (${err.details}) for bytes ${Buffer.from(bytes).toString('hex').slice(0, 100)}` : null;
  });
  console.log(`fuzz grpc ${op}: ${cases.length - skipped} messages, ${skipped} not expressible, ${junk.length} random (seed ${SEED}): ${seen}`);
  expect([...failures, ...rawFailures].slice(0, 5), `failures (replay with KSLATE_FUZZ_SEED=${SEED})`).toEqual([]);
}, 300_000);
