/**
 * gRPC reflection usable by strict clients (issue 31, item 4). grpcurl (Go) and grpcio
 * (Python, C++ underneath) build the descriptors they reflect with protobuf's own descriptor
 * pool, which refuses a file whose imports are missing or whose map entries are not named
 * `<Field>Entry`; descriptors rebuilt by protobufjs had both faults (grpc/grpc-node#3034,
 * fullstorydev/grpcurl#519). The client here is Python's grpcio with the C++ DescriptorPool
 * of Debian's python3-protobuf (test/transports/reflection_strict.py), knowing nothing of
 * kslate's protos: it lists, describes svc.v1.SvcService and calls Put with a request built
 * from the reflected descriptors.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildDescriptorSet, DESCRIPTOR_SET } from '../../scripts/proto-descriptors.mjs';
import { incident } from '../fixtures/classes.js';
import { KEYS, startTestGateway, type TestGateway } from '../setup/gateway.js';
import { freePort } from '../setup/ports.js';

const require = createRequire(import.meta.url);
/** Debian's interpreter: python3-grpcio and python3-protobuf install for it, not for a pyenv `python3`. */
const PYTHON = '/usr/bin/python3';
const SCRIPT = fileURLToPath(new URL('./reflection_strict.py', import.meta.url));
const REFLECTION_PROTOS = resolve(dirname(require.resolve('@grpc/reflection')), '../proto');

let t: TestGateway;
beforeAll(async () => {
  t = await startTestGateway([incident], { extraArgs: ['--grpc-port', String(await freePort())] });
});
afterAll(async () => {
  await t?.close();
});

/** Runs the Python client; its output is the failure message when it fails. */
function strictClient(record: string, field: string): Promise<any> {
  const args = [SCRIPT, `127.0.0.1:${t.gw.grpcPort}`, KEYS.alice!, REFLECTION_PROTOS, record, field];
  return new Promise((res, rej) =>
    execFile(PYTHON, args, { timeout: 60_000 }, (err, stdout, stderr) => {
      if (err) {
        const hint = /No module named|ENOENT/.test(`${stderr}${err.message}`)
          ? '\n(the client needs Debian python3-grpcio python3-protobuf python3-grpc-tools: apt-get install them; .ci/run does)'
          : '';
        rej(new Error(`${err.message}\n${stdout}${hint}`));
      } else res(JSON.parse(stdout));
    }),
  );
}

describe('a strict reflection client (Python grpcio, protobuf C++ descriptor pool)', () => {
  it('lists the services, describes svc.v1.SvcService and calls Put with a PutRequest built from the reflected descriptors', async () => {
    const out = await strictClient('incident/py-1', 'blob');
    expect(out.services).toEqual(
      expect.arrayContaining(['svc.v1.SvcService', 'grpc.health.v1.Health', 'grpc.reflection.v1.ServerReflection']),
    );
    // The files come by the names their imports use, with their imports.
    expect(out.files).toEqual(expect.arrayContaining(['svc/v1/svc.proto', 'google/protobuf/struct.proto']));
    expect(out.methods.Put).toEqual({ input: 'svc.v1.PutRequest', output: 'svc.v1.WriteResult', server_streaming: false });
    expect(out.methods.Watch).toEqual({ input: 'svc.v1.WatchRequest', output: 'svc.v1.WatchEvent', server_streaming: true });
    expect(Object.keys(out.methods).sort()).toEqual(
      ['Append', 'CheckpointLoad', 'CheckpointSave', 'Claim', 'Get', 'History', 'Put', 'Query', 'Transact', 'Watch'],
    );
    expect(out.messages['svc.v1.PutRequest'].value).toBe('google.protobuf.Value');
    expect(out.map_entry).toEqual({ name: 'svc.v1.QueryRequest.FiltersEntry', is_map: true });
    expect(out.put).toMatchObject({ version: '1', record_version: '1' });
    // The write is the one the reflected request described.
    const read = await t.call('alice', 'GET', '/v1/records/incident/py-1');
    expect(read.body.fields.blob.value).toEqual({ from: 'python', ok: true });
  }, 90_000);
});

describe('proto/descriptors.binpb', () => {
  it('is what protoc builds from proto/ and the health and reflection protos now (npm run proto:descriptors)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'kslate-desc-'));
    try {
      const fresh = join(dir, 'descriptors.binpb');
      buildDescriptorSet(fresh);
      expect(
        readFileSync(fresh).equals(readFileSync(DESCRIPTOR_SET)),
        'proto/descriptors.binpb is stale: run `npm run proto:descriptors` and commit it',
      ).toBe(true);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
