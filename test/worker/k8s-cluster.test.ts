/** Finding the cluster: KUBECONFIG when set, else the pod's service account, else none. */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { detectCluster } from '../../runtime/k8s/cluster.js';
import { startFakeCluster, type FakeCluster } from './fake-cluster.js';

let fake: FakeCluster;
let sa: string;
beforeAll(async () => {
  fake = await startFakeCluster();
  sa = mkdtempSync(join(tmpdir(), 'kslate-sa-'));
  writeFileSync(join(sa, 'token'), 'pod-token');
  writeFileSync(join(sa, 'ca.crt'), '');
});
afterAll(async () => {
  await fake?.close();
  rmSync(sa, { recursive: true, force: true });
});

test('no KUBECONFIG and not in a pod: no cluster', () => {
  expect(detectCluster({}, sa)).toBeNull();
  // The service host alone is not enough: the token must be mounted.
  expect(detectCluster({ KUBERNETES_SERVICE_HOST: '10.0.0.1' }, join(sa, 'missing'))).toBeNull();
});

test('KUBECONFIG wins, and a broken one is an error naming it', () => {
  const kc = detectCluster({ KUBECONFIG: fake.kubeconfig, KUBERNETES_SERVICE_HOST: '10.0.0.1' }, sa);
  expect(kc?.getCurrentCluster()?.server).toBe(fake.server);
  expect(() => detectCluster({ KUBECONFIG: '/nonexistent/kubeconfig' }, sa)).toThrow(
    /^cannot load the Kubernetes client configuration from KUBECONFIG=\/nonexistent\/kubeconfig: .*; fix the file or unset KUBECONFIG$/,
  );
});

test('in a pod: the service host and the mounted service-account token', () => {
  const kc = detectCluster({ KUBERNETES_SERVICE_HOST: '10.0.0.1', KUBERNETES_SERVICE_PORT: '443' }, sa);
  expect(kc?.getCurrentCluster()).toMatchObject({ server: 'https://10.0.0.1:443', caFile: `${sa}/ca.crt` });
  expect(kc?.getCurrentUser()?.authProvider).toEqual({ name: 'tokenFile', config: { tokenFile: `${sa}/token` } });
  expect(detectCluster({ KUBERNETES_SERVICE_HOST: 'fd00::1', KUBERNETES_SERVICE_PORT: '6443' }, sa)?.getCurrentCluster()?.server).toBe('https://[fd00::1]:6443');
});
