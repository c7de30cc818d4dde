/**
 * `npm run proto:descriptors`: builds proto/descriptors.binpb, the FileDescriptorSet that
 * gRPC server reflection serves (runtime/grpc/reflection.ts), with a real `protoc`:
 * svc/v1/svc.proto, google/rpc/status.proto, the health and reflection protos that
 * grpc-health-check and @grpc/reflection ship, and every file they import
 * (google/protobuf/struct.proto, any.proto). protoc names each file by its path and lists
 * its imports, and names map entries `<Field>Entry`, as every protobuf runtime expects;
 * descriptors rebuilt by protobufjs do neither (grpc/grpc-node#3034).
 *
 * protoc: Debian's `protobuf-compiler`, with the well-known types from `libprotobuf-dev`
 * under /usr/include (PROTOC_INCLUDE names another directory holding google/protobuf/*.proto).
 * test/transports/reflection-strict.test.ts rebuilds the set and fails while the committed
 * one differs, so run this after changing a .proto or updating those two packages.
 */
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const require = createRequire(import.meta.url);

export const DESCRIPTOR_SET = `${ROOT}proto/descriptors.binpb`;

/** The files served, each by the path it is imported by; their imports come with them. */
export const DESCRIBED_FILES = [
  'svc/v1/svc.proto',
  'google/rpc/status.proto',
  'health/v1/health.proto',
  'grpc/reflection/v1/reflection.proto',
  'grpc/reflection/v1alpha/reflection.proto',
];

/** Writes the descriptor set to `out` (default: proto/descriptors.binpb). */
export function buildDescriptorSet(out = DESCRIPTOR_SET) {
  const includes = [
    `${ROOT}proto`,
    // grpc-health-check's protoPath is <root>/health/v1/health.proto.
    resolve(dirname(require('grpc-health-check').protoPath), '../..'),
    resolve(dirname(require.resolve('@grpc/reflection')), '../proto'),
    process.env.PROTOC_INCLUDE ?? '/usr/include',
  ];
  try {
    execFileSync('protoc', [...includes.map((i) => `-I${i}`), '--include_imports', `--descriptor_set_out=${out}`, ...DESCRIBED_FILES], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
  } catch (e) {
    const why = e.code === 'ENOENT' ? 'protoc is not installed' : String(e.stderr || e.message).trim();
    throw new Error(
      `could not build the gRPC descriptor set: ${why}. Install protoc and the well-known types ` +
        '(apt-get install protobuf-compiler libprotobuf-dev; .ci/run does), or set PROTOC_INCLUDE.',
    );
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  buildDescriptorSet();
  console.log(`wrote ${DESCRIPTOR_SET}`);
}
