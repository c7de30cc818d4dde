/**
 * A kubeconfig file for a loopback fake API server (test/identity/fake-kube.ts,
 * test/worker/fake-cluster.ts): token auth, plain http. client-node 1.4 refuses plain http
 * unless told to skip TLS verification.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** Writes the file into a new temp dir; returns its path and the dir (for cleanup). */
export function writeKubeconfig(port: number, user: string, token: string): { kubeconfig: string; dir: string } {
  const dir = mkdtempSync(join(tmpdir(), 'kslate-kube-'));
  const kubeconfig = join(dir, 'kubeconfig');
  writeFileSync(
    kubeconfig,
    [
      'apiVersion: v1',
      'kind: Config',
      'clusters:',
      '- name: fake',
      '  cluster:',
      `    server: http://127.0.0.1:${port}`,
      '    insecure-skip-tls-verify: true',
      'users:',
      `- name: ${user}`,
      '  user:',
      `    token: ${token}`,
      'contexts:',
      '- name: fake',
      '  context:',
      '    cluster: fake',
      `    user: ${user}`,
      'current-context: fake',
      '',
    ].join('\n'),
  );
  return { kubeconfig, dir };
}
