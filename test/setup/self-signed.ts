/** A throwaway self-signed certificate for 127.0.0.1 (openssl), for gateways serving TLS in tests. */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

export function selfSignedCert(dir: string): { certFile: string; keyFile: string; cert: Buffer } {
  const certFile = join(dir, 'cert.pem');
  const keyFile = join(dir, 'key.pem');
  execFileSync('openssl', [
    'req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', '/CN=127.0.0.1',
    '-addext', 'subjectAltName=IP:127.0.0.1',
    '-keyout', keyFile, '-out', certFile,
  ], { stdio: 'ignore' });
  return { certFile, keyFile, cert: readFileSync(certFile) };
}
