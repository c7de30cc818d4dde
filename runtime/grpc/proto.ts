/**
 * Where the .proto files are and how they are loaded, for the gRPC server, its tests and
 * any Node client in this package. Types in ./generated come from the same files and options:
 *
 *   npx proto-loader-gen-types --keepCase --longs Number --enums String --defaults --oneofs \
 *     --grpcLib @grpc/grpc-js --importFileExtension .js -I proto -O runtime/grpc/generated \
 *     svc/v1/svc.proto google/rpc/status.proto
 */
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import * as protoLoader from '@grpc/proto-loader';

/**
 * `proto/` at the package root: two levels up from runtime/grpc/ when run from source
 * (vitest, tsx), three from dist/runtime/grpc/ when compiled.
 */
export const PROTO_DIR: string = (() => {
  for (const up of ['../../proto/', '../../../proto/']) {
    const dir = fileURLToPath(new URL(up, import.meta.url));
    if (existsSync(`${dir}svc/v1/svc.proto`)) return dir;
  }
  throw new Error(`proto/svc/v1/svc.proto not found above ${fileURLToPath(import.meta.url)}`);
})();

export const PROTO_FILES = ['svc/v1/svc.proto', 'google/rpc/status.proto'];

/**
 * - keepCase: field names stay snake_case, as in the HTTP bodies (decisions §7).
 * - longs Number: int64 versions arrive and leave as JS numbers, the same numbers the
 *   handlers see from HTTP JSON (every version the gateway issues is a safe integer; an
 *   absurd one a client sends loses precision exactly as it would in JSON and is judged
 *   by the same checks).
 * - defaults: plain scalars, repeated and map fields are always present on a decoded
 *   request (proto3 cannot tell an unset `string` from ""), unset messages are null; proto3
 *   `optional` fields get no default, so their absence stays visible.
 * - oneofs: the virtual oneof property names which member is set, e.g. Value's `kind`, so
 *   a google.protobuf.Value with no kind set can be told apart and refused.
 * - enums String: the one enum in play, NullValue, reads as "NULL_VALUE".
 */
export const LOADER_OPTIONS: protoLoader.Options = {
  keepCase: true,
  longs: Number,
  enums: String,
  defaults: true,
  oneofs: true,
  includeDirs: [PROTO_DIR],
};

/** The loaded package definition (service and message types) as grpc-js wants it. */
export function loadSvcProto(): protoLoader.PackageDefinition {
  return protoLoader.loadSync(PROTO_FILES, LOADER_OPTIONS);
}

/** A message type's serializer and deserializer from a loaded package definition. */
export function messageType<In, Out>(
  definition: protoLoader.PackageDefinition,
  fullName: string,
): protoLoader.MessageTypeDefinition<In, Out> {
  const t = definition[fullName] as unknown as protoLoader.MessageTypeDefinition<In, Out> | undefined;
  if (!t || t.format !== 'Protocol Buffer 3 DescriptorProto') throw new Error(`message ${fullName} is not in the loaded protos`);
  return t;
}
