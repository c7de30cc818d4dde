/**
 * One gRPC server-reflection exchange (grpc.reflection.v1, the proto @grpc/reflection ships),
 * as grpcurl does it: what the reflection tests of health, History and Watch share.
 */
import { createRequire } from 'node:module';
import { dirname, resolve } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';

const require = createRequire(import.meta.url);
const dir = resolve(dirname(require.resolve('@grpc/reflection')), '../proto');
const pkg = grpc.loadPackageDefinition(
  protoLoader.loadSync(['grpc/reflection/v1/reflection.proto'], { keepCase: true, longs: String, defaults: true, oneofs: true, includeDirs: [dir] }),
) as any;

/** Send one ServerReflectionInfo request to `address` and read its one response. */
export function reflect(address: string, req: object): Promise<any> {
  const client = new pkg.grpc.reflection.v1.ServerReflection(address, grpc.credentials.createInsecure());
  return new Promise((res, rej) => {
    const stream = client.ServerReflectionInfo();
    stream.on('data', (m: unknown) => {
      res(m);
      stream.end();
      client.close();
    });
    stream.on('error', (e: unknown) => {
      client.close();
      rej(e);
    });
    stream.write(req);
  });
}

/** The file descriptors that define svc.v1.SvcService, as text to look for names in. */
export async function svcDescriptorText(address: string): Promise<string> {
  const r = await reflect(address, { file_containing_symbol: 'svc.v1.SvcService' });
  if (r.error_response) throw new Error(`reflection refused: ${JSON.stringify(r.error_response)}`);
  return Buffer.concat(r.file_descriptor_response.file_descriptor_proto as Buffer[]).toString('latin1');
}
