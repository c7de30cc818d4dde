/**
 * gRPC server reflection (grpc.reflection.v1 and v1alpha, served by @grpc/reflection) over
 * the descriptor set a real protoc built from proto/ (proto/descriptors.binpb,
 * `npm run proto:descriptors`): svc.v1.SvcService and google.rpc.Status, the health and
 * reflection services, and what they import (google/protobuf/struct.proto, any.proto).
 *
 * @grpc/reflection is usually given proto-loader's package definition, whose descriptors
 * protobufjs rebuilds: files named after their package (`svc_v1.proto`) without their
 * imports, map entries not named `<Field>Entry`. grpcurl and grpcio refuse those
 * (grpc/grpc-node#3034, fullstorydev/grpcurl#519). Here it gets protoc's files verbatim, and
 * serves them by the names their imports use (docs/grpc.md, grpcurl).
 */
import { readFileSync } from 'node:fs';
import type * as grpc from '@grpc/grpc-js';
import type { PackageDefinition } from '@grpc/proto-loader';
import { ReflectionService } from '@grpc/reflection';
import { PROTO_DIR } from './proto.js';

/** The committed FileDescriptorSet, beside the protos it describes (the image copies proto/). */
export const DESCRIPTOR_SET_PATH = `${PROTO_DIR}descriptors.binpb`;

/**
 * The serialized FileDescriptorProtos of a FileDescriptorSet (`repeated FileDescriptorProto
 * file = 1;`, so each is a tag 0x0a, a varint length and that many bytes), left as protoc
 * wrote them.
 */
export function descriptorFiles(set: Uint8Array): Uint8Array[] {
  const files: Uint8Array[] = [];
  let at = 0;
  while (at < set.length) {
    if (set[at++] !== 0x0a) throw new Error(`not a FileDescriptorSet: unexpected field tag at byte ${at - 1}`);
    let length = 0;
    for (let shift = 0; ; shift += 7) {
      if (at >= set.length || shift > 28) throw new Error('not a FileDescriptorSet: bad length');
      const b = set[at++]!;
      length += (b & 0x7f) * 2 ** shift;
      if (b < 0x80) break;
    }
    if (at + length > set.length) throw new Error('not a FileDescriptorSet: truncated file');
    files.push(set.subarray(at, at + length));
    at += length;
  }
  return files;
}

let files: Uint8Array[] | undefined;

/** Adds the reflection services (v1 and v1alpha) describing every file of the set. */
export function addReflection(server: Pick<grpc.Server, 'addService'>): void {
  files ??= descriptorFiles(readFileSync(DESCRIPTOR_SET_PATH));
  // ReflectionService reads nothing of a package definition but each entry's
  // `fileDescriptorProtos`, which it indexes by file name; one entry carries them all.
  const definition = { [DESCRIPTOR_SET_PATH]: { fileDescriptorProtos: files } } as unknown as PackageDefinition;
  new ReflectionService(definition).addToServer(server);
}
