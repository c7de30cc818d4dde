/**
 * `helm template` assertions per value, with every pinned helm: what each key of the
 * deployment values table (interface "Deployment values") does to the rendered objects.
 */
import { readFileSync } from 'node:fs';
import { parseAllDocuments } from 'yaml';
import { describe, expect, test } from 'vitest';
import { find, HELM_VERSIONS, NAMESPACE, ofKind, render, renderError, type K8sObject } from './render.js';
import { parseManifest } from '../../handlers/class-schema.js';
import { validateAgainstCrd } from './crd.js';

const GATEWAY = 'rel-kslate-gateway';
const WORKER = 'rel-kslate-worker';
const container = (deployment: K8sObject) => deployment.spec.template.spec.containers[0];
const args = (deployment: K8sObject): string[] => container(deployment).args;
/** The value following `flag` in the container's args (undefined when the flag is absent). */
const flag = (deployment: K8sObject, name: string): string | undefined => {
  const a = args(deployment);
  const i = a.indexOf(name);
  return i < 0 ? undefined : a[i + 1];
};
const ports = (c: { ports: { name: string; containerPort: number }[] }) => Object.fromEntries(c.ports.map((p) => [p.name, p.containerPort]));
const servicePorts = (s: K8sObject) => Object.fromEntries(s.spec.ports.map((p: { name: string; port: number; targetPort: string }) => [p.name, [p.port, p.targetPort]]));
const volume = (d: K8sObject, name: string) => d.spec.template.spec.volumes.find((v: { name: string }) => v.name === name);
const mount = (d: K8sObject, name: string) => container(d).volumeMounts.find((v: { name: string }) => v.name === name);
const dsnEnv = (d: K8sObject) => container(d).env.find((e: { name: string }) => e.name === 'KSLATE_DATABASE_URL').valueFrom.secretKeyRef;

describe.each(HELM_VERSIONS)('helm %s template', (v) => {
  describe('PodDisruptionBudget', () => {
    test('rendered for the default two replicas, minAvailable from values', () => {
      const pdb = find(render(v), 'PodDisruptionBudget', GATEWAY);
      expect(pdb.apiVersion).toBe('policy/v1');
      expect(pdb.spec.minAvailable).toBe(1);
      expect(pdb.spec.selector.matchLabels['app.kubernetes.io/component']).toBe('gateway');
      expect(find(render(v, ['default'], { 'gateway.replicas': 3, 'gateway.podDisruptionBudget.minAvailable': 2 }), 'PodDisruptionBudget', GATEWAY).spec.minAvailable).toBe(2);
    });
    test('a percentage is kept as a percentage (Kubernetes IntOrString), not turned into 0', () => {
      expect(find(render(v, ['default'], { 'gateway.podDisruptionBudget.minAvailable': '50%' }), 'PodDisruptionBudget', GATEWAY).spec.minAvailable).toBe('50%');
      expect(find(render(v, ['default'], { 'gateway.replicas': 3, 'gateway.podDisruptionBudget.minAvailable': '66%' }), 'PodDisruptionBudget', GATEWAY).spec.minAvailable).toBe('66%');
    });
    test('a budget that lets no pod be evicted is refused, naming the keys (a number, or a percentage rounded up as Kubernetes does)', () => {
      const blocking = /gateway\.podDisruptionBudget\.minAvailable .* lets no gateway pod be evicted, so every node drain and cluster upgrade would hang: set minAvailable below the replicas/;
      expect(renderError(v, ['default'], { 'gateway.podDisruptionBudget.minAvailable': 2 })).toMatch(blocking);
      expect(renderError(v, ['default'], { 'gateway.replicas': 3, 'gateway.podDisruptionBudget.minAvailable': 5 })).toMatch(blocking);
      expect(renderError(v, ['default'], { 'gateway.podDisruptionBudget.minAvailable': '60%' })).toMatch(blocking); // ceil(1.2) = 2 of 2
      expect(renderError(v, ['default'], { 'gateway.replicas': 3, 'gateway.podDisruptionBudget.minAvailable': '67%' })).toMatch(blocking); // ceil(2.01) = 3
      // No budget rendered, nothing to block: one replica, or disabled.
      expect(ofKind(render(v, ['one-replica'], { 'gateway.podDisruptionBudget.minAvailable': 5 }), 'PodDisruptionBudget')).toEqual([]);
      expect(ofKind(render(v, ['default'], { 'gateway.podDisruptionBudget.enabled': false, 'gateway.podDisruptionBudget.minAvailable': 2 }), 'PodDisruptionBudget')).toEqual([]);
    });
    test('not rendered with one replica, nor when disabled', () => {
      expect(ofKind(render(v, ['one-replica']), 'PodDisruptionBudget')).toEqual([]);
      expect(ofKind(render(v, ['default'], { 'gateway.podDisruptionBudget.enabled': false }), 'PodDisruptionBudget')).toEqual([]);
    });
  });

  describe('database source', () => {
    test('the default password is refused, with the keys to set', () => {
      const err = renderError(v, [], {});
      expect(err).toMatch(/postgres\.password is the default kslate-dev-password: set postgres\.password, or postgres\.allowDefaultPassword=true/);
    });
    test('allowDefaultPassword accepts it; a set password is put in the DSN, URL-escaped', () => {
      const dflt = find(render(v, [], { 'postgres.allowDefaultPassword': true }), 'Secret', 'rel-kslate-db');
      expect(dflt.stringData.dsn).toBe('postgres://kslate:kslate-dev-password@rel-kslate-postgres.kslate.svc:5432/kslate?sslmode=disable');
      const own = find(render(v, [], { 'postgres.password': 'p@ss w/rd+' }), 'Secret', 'rel-kslate-db');
      expect(own.stringData.dsn).toBe('postgres://kslate:p%40ss%20w%2Frd%2B@rel-kslate-postgres.kslate.svc:5432/kslate?sslmode=disable');
      expect(new URL(own.stringData.dsn).password).toBe('p%40ss%20w%2Frd%2B');
      expect(decodeURIComponent(new URL(own.stringData.dsn).password)).toBe('p@ss w/rd+');
      expect(own.stringData.POSTGRES_PASSWORD).toBe('p@ss w/rd+');
    });
    test('bundled: StatefulSet, PVC template, both Services, gateway and worker read the chart Secret', () => {
      const objs = render(v);
      const sts = find(objs, 'StatefulSet', 'rel-kslate-postgres');
      expect(sts.spec.replicas).toBe(1);
      expect(sts.spec.serviceName).toBe('rel-kslate-postgres-headless');
      expect(container(sts).image).toBe('docker.io/library/postgres:16-alpine');
      expect(sts.spec.template.spec.securityContext).toMatchObject({ runAsUser: 70, fsGroup: 70, runAsNonRoot: true });
      expect(container(sts).readinessProbe.exec.command.join(' ')).toMatch(/pg_isready/);
      expect(sts.spec.volumeClaimTemplates[0].spec.resources.requests.storage).toBe('1Gi');
      expect(sts.spec.volumeClaimTemplates[0].spec.storageClassName).toBeUndefined();
      expect(find(objs, 'Service', 'rel-kslate-postgres-headless').spec.clusterIP).toBe('None');
      expect(servicePorts(find(objs, 'Service', 'rel-kslate-postgres'))).toEqual({ postgres: [5432, 'postgres'] });
      for (const d of [GATEWAY, WORKER]) expect(dsnEnv(find(objs, 'Deployment', d))).toEqual({ name: 'rel-kslate-db', key: 'dsn' });
      const sized = find(render(v, ['default'], { 'postgres.storage.size': '5Gi', 'postgres.storage.storageClass': 'fast' }), 'StatefulSet', 'rel-kslate-postgres');
      expect(sized.spec.volumeClaimTemplates[0].spec).toMatchObject({ storageClassName: 'fast', resources: { requests: { storage: '5Gi' } } });
    });
    test('external.existingSecret: its key is read, no chart Secret and no PostgreSQL', () => {
      const objs = render(v, ['external-dsn']);
      for (const d of [GATEWAY, WORKER]) expect(dsnEnv(find(objs, 'Deployment', d))).toEqual({ name: 'kslate-database', key: 'url' });
      expect(ofKind(objs, 'Secret')).toEqual([]);
      expect(ofKind(objs, 'StatefulSet')).toEqual([]);
      expect(objs.filter((o) => o.metadata.name.includes('postgres'))).toEqual([]);
    });
    test('external.replicaDsns: the gateway reads them comma-separated from a Secret of their own; the lag and wait bounds pass as flags', () => {
      const dsns = ['postgres://kslate:s@db-ro-1:5432/kslate?sslmode=require', 'postgres://kslate:s@db-ro-2:5432/kslate?sslmode=require'];
      const objs = render(v, ['tls'], { 'external.replicaDsns': dsns, 'gateway.replicaMaxLag': '500ms', 'gateway.replicaWait': '100ms' });
      expect(find(objs, 'Secret', 'rel-kslate-db-replicas').stringData).toEqual({ 'replica-dsns': dsns.join(',') });
      const gw = find(objs, 'Deployment', GATEWAY);
      const env = container(gw).env.find((e: { name: string }) => e.name === 'KSLATE_DATABASE_REPLICA_URL');
      expect(env.valueFrom.secretKeyRef).toEqual({ name: 'rel-kslate-db-replicas', key: 'replica-dsns' });
      expect(flag(gw, '--replica-max-lag')).toBe('500ms');
      expect(flag(gw, '--replica-wait')).toBe('100ms');
      // Defaults pass no flag; others do.
      expect(flag(gw, '--write-lsn')).toBeUndefined();
      const lsn = find(render(v, ['tls'], { 'gateway.writeLsn': 'on', 'gateway.idempotencyTtl': '2h' }), 'Deployment', GATEWAY);
      expect(flag(lsn, '--write-lsn')).toBe('on');
      expect(flag(lsn, '--idempotency-ttl')).toBe('2h');
      // The worker sweeps on the primary only.
      expect(container(find(objs, 'Deployment', WORKER)).env.some((e: { name: string }) => e.name === 'KSLATE_DATABASE_REPLICA_URL')).toBe(false);
      // An existing Secret instead: no chart Secret for them.
      const own = render(v, ['tls'], { 'external.replicaExistingSecret': 'ro-dsns', 'external.replicaExistingSecretKey': 'urls' });
      expect(ofKind(own, 'Secret').map((o) => o.metadata.name)).not.toContain('rel-kslate-db-replicas');
      expect(container(find(own, 'Deployment', GATEWAY)).env.find((e: { name: string }) => e.name === 'KSLATE_DATABASE_REPLICA_URL').valueFrom.secretKeyRef).toEqual({
        name: 'ro-dsns',
        key: 'urls',
      });
      // Without standbys: no variable, no flags (the gateway's defaults).
      const none = find(render(v, ['tls']), 'Deployment', GATEWAY);
      expect(container(none).env.some((e: { name: string }) => e.name === 'KSLATE_DATABASE_REPLICA_URL')).toBe(false);
      expect(flag(none, '--replica-max-lag')).toBeUndefined();
    });
    test('external.dsn: the chart Secret holds it as given', () => {
      const objs = render(v, ['tls']);
      expect(find(objs, 'Secret', 'rel-kslate-db').stringData).toEqual({ dsn: 'postgres://kslate:secret@db.example.com:5432/kslate?sslmode=verify-full' });
      expect(dsnEnv(find(objs, 'Deployment', GATEWAY))).toEqual({ name: 'rel-kslate-db', key: 'dsn' });
    });
    test('exactly one source: none and two are refused naming the keys', () => {
      expect(renderError(v, [], { 'postgres.enabled': false })).toMatch(/no database configured: set external\.existingSecret .* or external\.dsn .* or postgres\.enabled=true/);
      expect(renderError(v, ['default'], { 'external.dsn': 'postgres://x/y' })).toMatch(
        /more than one database source configured \(postgres\.enabled=true, external\.dsn\): set exactly one of/,
      );
      expect(renderError(v, ['external-dsn'], { 'external.dsn': 'postgres://x/y' })).toMatch(/more than one database source configured \(external\.dsn, external\.existingSecret\)/);
    });
  });

  describe('ports', () => {
    test('defaults: Service 80 → 8080, gateway metrics 9100, worker health 8081 and metrics 9090, no gRPC anywhere', () => {
      const objs = render(v);
      const gw = find(objs, 'Deployment', GATEWAY);
      expect(ports(container(gw))).toEqual({ http: 8080, metrics: 9100 });
      expect(flag(gw, '--listen')).toBe('0.0.0.0:8080');
      expect(flag(gw, '--metrics-port')).toBe('9100');
      expect(flag(gw, '--grpc-port')).toBe('0');
      expect(servicePorts(find(objs, 'Service', 'rel-kslate'))).toEqual({ http: [80, 'http'] });
      expect(servicePorts(find(objs, 'Service', 'rel-kslate-gateway-metrics'))).toEqual({ metrics: [9100, 'metrics'] });
      expect(container(gw).readinessProbe.httpGet).toEqual({ path: '/readyz', port: 'metrics' });
      expect(container(gw).livenessProbe.httpGet).toEqual({ path: '/healthz', port: 'metrics' });

      const wk = find(objs, 'Deployment', WORKER);
      expect(wk.spec.replicas).toBe(1);
      expect(ports(container(wk))).toEqual({ health: 8081, metrics: 9090 });
      expect(args(wk)).toEqual(['worker', '--sweep-interval', '60s', '--health-port', '8081', '--metrics-port', '9090', '--watch-namespace', '', '--listen', '0.0.0.0:8080']);
      expect(container(wk).readinessProbe.httpGet).toEqual({ path: '/readyz', port: 'health' });
      expect(container(wk).livenessProbe.httpGet).toEqual({ path: '/healthz', port: 'health' });
      expect(servicePorts(find(objs, 'Service', 'rel-kslate-worker-metrics'))).toEqual({ metrics: [9090, 'metrics'] });

      // No port named grpc on any container or Service (the flag says 0: gRPC off).
      const named = objs.flatMap((o) => [...(o.spec?.ports ?? []), ...(o.spec?.template?.spec?.containers ?? []).flatMap((c: { ports?: unknown[] }) => c.ports ?? [])]);
      expect(named.length).toBeGreaterThan(0);
      expect(named.filter((p: { name?: string }) => p.name === 'grpc')).toEqual([]);
    });
    test('gateway.maxHeapMB: NODE_OPTIONS caps the V8 heap (384 by default, under the 512Mi limit); 0 leaves Node\'s default', () => {
      const env = (objs: K8sObject[]) => container(find(objs, 'Deployment', GATEWAY)).env.find((e: { name: string }) => e.name === 'NODE_OPTIONS');
      expect(env(render(v))).toEqual({ name: 'NODE_OPTIONS', value: '--max-old-space-size=384' });
      expect(env(render(v, ['default'], { 'gateway.maxHeapMB': 1024 }))).toEqual({ name: 'NODE_OPTIONS', value: '--max-old-space-size=1024' });
      expect(env(render(v, ['default'], { 'gateway.maxHeapMB': 0 }))).toBeUndefined();
    });
    test('gateway.dbPoolSize: passed as --db-pool-size when set; 0 leaves the gateway\'s default', () => {
      const gwArgs = (objs: K8sObject[]) => args(find(objs, 'Deployment', GATEWAY));
      expect(gwArgs(render(v))).not.toContain('--db-pool-size');
      const set = gwArgs(render(v, ['default'], { 'gateway.dbPoolSize': 6 }));
      expect(set[set.indexOf('--db-pool-size') + 1]).toBe('6');
    });
    test('gateway.allowAsyncReplication: --allow-async-replication true for an external database only when set; the bundled one (no standby) implies it', () => {
      const gwArgs = (objs: K8sObject[]) => args(find(objs, 'Deployment', GATEWAY));
      expect(gwArgs(render(v, ['external-dsn']))).not.toContain('--allow-async-replication');
      const set = gwArgs(render(v, ['external-dsn'], { 'gateway.allowAsyncReplication': true }));
      expect(set[set.indexOf('--allow-async-replication') + 1]).toBe('true');
      const bundled = gwArgs(render(v));
      expect(bundled[bundled.indexOf('--allow-async-replication') + 1]).toBe('true');
    });
    test('gateway.limits: the connection, stream and session caps as flags; a per-caller cap above its total is refused', () => {
      const gw = find(render(v), 'Deployment', GATEWAY);
      expect([
        flag(gw, '--max-conns'),
        flag(gw, '--max-conns-per-address'),
        flag(gw, '--watch-max-streams'),
        flag(gw, '--watch-max-streams-per-identity'),
        flag(gw, '--mcp-max-sessions'),
        flag(gw, '--mcp-max-sessions-per-identity'),
      ]).toEqual(['4096', '256', '1024', '256', '256', '64']);
      const off = find(render(v, ['default'], { 'gateway.limits.maxConnsPerAddress': 0 }), 'Deployment', GATEWAY);
      expect(flag(off, '--max-conns-per-address')).toBe('0');
      expect(renderError(v, ['default'], { 'gateway.limits.maxConnsPerAddress': 5000 })).toMatch(
        /gateway\.limits\.maxConnsPerAddress \(5000\) is above gateway\.limits\.maxConns \(4096\)/,
      );
      expect(renderError(v, ['default'], { 'gateway.limits.watchMaxStreams': 100 })).toMatch(
        /gateway\.limits\.watchMaxStreamsPerIdentity \(256\) is above gateway\.limits\.watchMaxStreams \(100\)/,
      );
      expect(renderError(v, ['default'], { 'gateway.limits.mcpMaxSessionsPerIdentity': 300 })).toMatch(
        /gateway\.limits\.mcpMaxSessionsPerIdentity \(300\) is above gateway\.limits\.mcpMaxSessions \(256\)/,
      );
      expect(renderError(v, ['default'], { 'gateway.limits.watchMaxStreams': 0 })).toMatch(/watchMaxStreams/);
    });
    test('gateway.maxSemiSpaceMB: NODE_OPTIONS sizes the young generation beside the heap cap (0, Node\'s default, by default)', () => {
      const env = (objs: K8sObject[]) => container(find(objs, 'Deployment', GATEWAY)).env.find((e: { name: string }) => e.name === 'NODE_OPTIONS');
      expect(env(render(v, ['default'], { 'gateway.maxSemiSpaceMB': 64 }))).toEqual({
        name: 'NODE_OPTIONS',
        value: '--max-old-space-size=384 --max-semi-space-size=64',
      });
      expect(env(render(v, ['default'], { 'gateway.maxHeapMB': 0, 'gateway.maxSemiSpaceMB': 32 }))).toEqual({
        name: 'NODE_OPTIONS',
        value: '--max-semi-space-size=32',
      });
    });
    test('other ports and worker.interval go through', () => {
      const objs = render(v, ['default'], {
        'gateway.listenPort': 8443,
        'gateway.metricsPort': 9200,
        'worker.healthPort': 8082,
        'worker.metricsPort': 9091,
        'worker.interval': '5m',
      });
      const gw = find(objs, 'Deployment', GATEWAY);
      expect(ports(container(gw))).toEqual({ http: 8443, metrics: 9200 });
      expect(flag(gw, '--listen')).toBe('0.0.0.0:8443');
      expect(servicePorts(find(objs, 'Service', 'rel-kslate'))).toEqual({ http: [80, 'http'] });
      const wk = find(objs, 'Deployment', WORKER);
      expect([flag(wk, '--health-port'), flag(wk, '--metrics-port'), flag(wk, '--sweep-interval')]).toEqual(['8082', '9091', '5m']);
      expect(servicePorts(find(objs, 'Service', 'rel-kslate-worker-metrics'))).toEqual({ metrics: [9091, 'metrics'] });
    });
    test('the web console: --ui true by default, gateway.ui=false turns it off', () => {
      expect(flag(find(render(v, ['default']), 'Deployment', GATEWAY), '--ui')).toBe('true');
      expect(flag(find(render(v, ['default'], { 'gateway.ui': false }), 'Deployment', GATEWAY), '--ui')).toBe('false');
    });
    test('the console session lifetime: --ui-session-ttl 8h by default, gateway.uiSessionTtl sets it', () => {
      expect(flag(find(render(v, ['default']), 'Deployment', GATEWAY), '--ui-session-ttl')).toBe('8h');
      expect(flag(find(render(v, ['default'], { 'gateway.uiSessionTtl': '30m' }), 'Deployment', GATEWAY), '--ui-session-ttl')).toBe('30m');
    });
    test('two ports of one container that collide are refused, naming both keys', () => {
      expect(renderError(v, ['default'], { 'gateway.metricsPort': 8080 })).toMatch(
        /gateway\.listenPort and gateway\.metricsPort are both 8080: one container cannot listen twice on a port; give each its own/,
      );
      expect(renderError(v, ['default'], { 'gateway.grpcPort': 9100 })).toMatch(/gateway\.metricsPort and gateway\.grpcPort are both 9100/);
      expect(renderError(v, ['default'], { 'gateway.grpcPort': 8080 })).toMatch(/gateway\.listenPort and gateway\.grpcPort are both 8080/);
      expect(renderError(v, ['default'], { 'worker.metricsPort': 8081 })).toMatch(/worker\.healthPort and worker\.metricsPort are both 8081/);
      // Different pods may share a number: the worker's metrics on the gateway's listen port is fine.
      expect(ports(container(find(render(v, ['default'], { 'worker.metricsPort': 8080 }), 'Deployment', WORKER)))).toEqual({ health: 8081, metrics: 8080 });
    });
    test('grpcPort 9000: container port, Service port and flag', () => {
      const objs = render(v, ['default'], { 'gateway.grpcPort': 9000 });
      const gw = find(objs, 'Deployment', GATEWAY);
      expect(ports(container(gw))).toEqual({ http: 8080, grpc: 9000, metrics: 9100 });
      expect(flag(gw, '--grpc-port')).toBe('9000');
      expect(servicePorts(find(objs, 'Service', 'rel-kslate'))).toEqual({ http: [80, 'http'], grpc: [9000, 'grpc'] });
    });
  });

  describe('identity', () => {
    test('k8s-sa (default): auth-delegator binding for the gateway ServiceAccount and --k8s-audience', () => {
      const objs = render(v, ['default'], { 'gateway.k8sAudience': 'agents.example.com' });
      const gw = find(objs, 'Deployment', GATEWAY);
      expect(flag(gw, '--identity')).toBe('k8s-sa');
      expect(flag(gw, '--k8s-audience')).toBe('agents.example.com');
      expect(gw.spec.template.spec.serviceAccountName).toBe(GATEWAY);
      expect(gw.spec.template.spec.automountServiceAccountToken).toBe(true);
      find(objs, 'ServiceAccount', GATEWAY);
      const crbs = ofKind(objs, 'ClusterRoleBinding').filter((b) => b.roleRef.name === 'system:auth-delegator');
      expect(crbs).toHaveLength(1);
      expect(crbs[0].roleRef).toEqual({ apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'system:auth-delegator' });
      expect(crbs[0].subjects).toEqual([{ kind: 'ServiceAccount', name: GATEWAY, namespace: NAMESPACE }]);
    });
    test('without k8s-sa: no auth-delegator binding, no --k8s-audience, no token mounted, the ServiceAccount still there', () => {
      const objs = render(v, ['default'], { 'gateway.identity': 'apikey', 'gateway.apikeysSecret': 'keys' });
      const gw = find(objs, 'Deployment', GATEWAY);
      expect(flag(gw, '--identity')).toBe('apikey');
      expect(flag(gw, '--k8s-audience')).toBeUndefined();
      expect(gw.spec.template.spec.automountServiceAccountToken).toBe(false);
      expect(ofKind(objs, 'ClusterRoleBinding').filter((b) => b.roleRef.name === 'system:auth-delegator')).toEqual([]);
      find(objs, 'ServiceAccount', GATEWAY);
    });
    test('apikey without gateway.apikeysSecret is refused', () => {
      expect(renderError(v, ['default'], { 'gateway.identity': 'k8s-sa,apikey' })).toMatch(
        /gateway\.identity includes apikey but gateway\.apikeysSecret is empty: set gateway\.apikeysSecret/,
      );
    });
    test('apikey with a Secret: the key is mounted and passed as --apikeys, providers in order', () => {
      const gw = find(render(v, ['apikey']), 'Deployment', GATEWAY);
      expect(flag(gw, '--identity')).toBe('k8s-sa,apikey');
      expect(flag(gw, '--apikeys')).toBe('/etc/kslate/apikeys/apikeys.yaml');
      expect(volume(gw, 'apikeys').secret).toEqual({ secretName: 'kslate-apikeys', items: [{ key: 'apikeys.yaml', path: 'apikeys.yaml' }] });
      expect(mount(gw, 'apikeys')).toEqual({ name: 'apikeys', mountPath: '/etc/kslate/apikeys', readOnly: true });
      const other = find(render(v, ['apikey'], { 'gateway.apikeysSecretKey': 'keys.yml' }), 'Deployment', GATEWAY);
      expect(flag(other, '--apikeys')).toBe('/etc/kslate/apikeys/keys.yml');
      expect(volume(other, 'apikeys').secret.items).toEqual([{ key: 'keys.yml', path: 'keys.yml' }]);
    });
    test('oidc: the --oidc-* flags; issuer and audience required', () => {
      const oidc = { 'gateway.identity': 'oidc,apikey', 'gateway.apikeysSecret': 'keys', 'gateway.oidc.issuer': 'https://login.example.com/realms/agents', 'gateway.oidc.audience': 'kslate' };
      const gw = find(render(v, ['default'], oidc), 'Deployment', GATEWAY);
      expect(flag(gw, '--identity')).toBe('oidc,apikey');
      expect(flag(gw, '--oidc-issuer')).toBe('https://login.example.com/realms/agents');
      expect(flag(gw, '--oidc-audience')).toBe('kslate');
      expect(flag(gw, '--oidc-username-claim')).toBe('sub');
      expect(flag(gw, '--oidc-jwks-url')).toBeUndefined();
      const jwks = find(render(v, ['default'], { ...oidc, 'gateway.oidc.jwksUrl': 'https://login.example.com/jwks', 'gateway.oidc.usernameClaim': 'email' }), 'Deployment', GATEWAY);
      expect([flag(jwks, '--oidc-jwks-url'), flag(jwks, '--oidc-username-claim')]).toEqual(['https://login.example.com/jwks', 'email']);
      expect(renderError(v, ['default'], { ...oidc, 'gateway.oidc.issuer': '' })).toMatch(/gateway\.identity includes oidc: set gateway\.oidc\.issuer and gateway\.oidc\.audience/);
      expect(renderError(v, ['default'], { ...oidc, 'gateway.oidc.audience': '' })).toMatch(/set gateway\.oidc\.issuer and gateway\.oidc\.audience/);
      expect(flag(find(render(v), 'Deployment', GATEWAY), '--oidc-issuer')).toBeUndefined();
    });
    test('an unknown provider is refused', () => {
      // The template's own message; a values schema that constrains the list refuses it first,
      // naming the same key.
      expect(renderError(v, ['default'], { 'gateway.identity': 'k8s-sa,ldap' })).toMatch(/gateway\.identity names unknown provider "ldap"|gateway[./]identity/);
    });
  });

  describe('TLS', () => {
    test('the kubernetes.io/tls Secret is mounted and passed as --tls-cert/--tls-key', () => {
      const gw = find(render(v, ['tls']), 'Deployment', GATEWAY);
      expect(flag(gw, '--tls-cert')).toBe('/etc/kslate/tls/tls.crt');
      expect(flag(gw, '--tls-key')).toBe('/etc/kslate/tls/tls.key');
      expect(volume(gw, 'tls').secret.secretName).toBe('kslate-tls');
      expect(mount(gw, 'tls')).toEqual({ name: 'tls', mountPath: '/etc/kslate/tls', readOnly: true });
      const plain = find(render(v), 'Deployment', GATEWAY);
      expect(flag(plain, '--tls-cert')).toBeUndefined();
      expect(volume(plain, 'tls')).toBeUndefined();
    });
    test('tls.enabled without a secretName is refused', () => {
      expect(renderError(v, ['default'], { 'tls.enabled': true })).toMatch(/tls\.enabled is true but tls\.secretName is empty/);
    });
  });

  describe('worker RBAC', () => {
    const rules = [
      { apiGroups: ['kslate.dev'], resources: ['sharedcontexts'], verbs: ['get', 'list', 'watch'] },
      // Exactly what the worker calls (docs/worker-cluster.md), nothing more.
      { apiGroups: ['kslate.dev'], resources: ['sharedcontexts/status'], verbs: ['patch'] },
      // list by label, server-side apply (patch, create when new), delete; never a get by name.
      { apiGroups: ['rbac.authorization.k8s.io'], resources: ['roles', 'rolebindings'], verbs: ['list', 'create', 'patch', 'delete'] },
    ];
    test('watchNamespace empty: a ClusterRole and ClusterRoleBinding, no Role', () => {
      const objs = render(v);
      const cr = find(objs, 'ClusterRole', `kslate-${WORKER}`);
      expect(cr.rules).toEqual(rules);
      const crb = find(objs, 'ClusterRoleBinding', `kslate-${WORKER}`);
      expect(crb.roleRef).toEqual({ apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: `kslate-${WORKER}` });
      expect(crb.subjects).toEqual([{ kind: 'ServiceAccount', name: WORKER, namespace: NAMESPACE }]);
      expect(ofKind(objs, 'Role')).toEqual([]);
      expect(ofKind(objs, 'RoleBinding')).toEqual([]);
      expect(find(objs, 'Deployment', WORKER).spec.template.spec.serviceAccountName).toBe(WORKER);
    });
    test('watchNamespace set: a Role and RoleBinding in that namespace, no ClusterRole, the flag passed', () => {
      const objs = render(v, ['default'], { watchNamespace: 'agents' });
      const role = find(objs, 'Role', WORKER);
      expect(role.metadata.namespace).toBe('agents');
      expect(role.rules).toEqual(rules);
      const rb = find(objs, 'RoleBinding', WORKER);
      expect(rb.metadata.namespace).toBe('agents');
      expect(rb.roleRef).toEqual({ apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: WORKER });
      expect(rb.subjects).toEqual([{ kind: 'ServiceAccount', name: WORKER, namespace: NAMESPACE }]);
      expect(ofKind(objs, 'ClusterRole')).toEqual([]);
      expect(ofKind(objs, 'ClusterRoleBinding').map((b) => b.roleRef.name)).toEqual(['system:auth-delegator']);
      expect(flag(find(objs, 'Deployment', WORKER), '--watch-namespace')).toBe('agents');
    });
  });

  describe('NetworkPolicy', () => {
    test('off by default', () => {
      expect(ofKind(render(v), 'NetworkPolicy')).toEqual([]);
    });
    test('API open to all, metrics only from networkPolicy.from, database only from gateway, worker and from', () => {
      const objs = render(v, ['network-policy'], { 'gateway.grpcPort': 9000 });
      const from = [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } } }];
      const gw = find(objs, 'NetworkPolicy', GATEWAY);
      expect(gw.spec.podSelector.matchLabels['app.kubernetes.io/component']).toBe('gateway');
      expect(gw.spec.ingress).toEqual([
        { ports: [{ port: 8080, protocol: 'TCP' }, { port: 9000, protocol: 'TCP' }] },
        { from, ports: [{ port: 9100, protocol: 'TCP' }] },
      ]);
      expect(find(objs, 'NetworkPolicy', WORKER).spec.ingress).toEqual([{ from, ports: [{ port: 9090, protocol: 'TCP' }] }]);
      const pg = find(objs, 'NetworkPolicy', 'rel-kslate-postgres');
      expect(pg.spec.ingress).toHaveLength(1);
      expect(pg.spec.ingress[0].ports).toEqual([{ port: 5432, protocol: 'TCP' }]);
      expect(pg.spec.ingress[0].from.map((p: { podSelector?: { matchLabels: Record<string, string> } }) => p.podSelector?.matchLabels['app.kubernetes.io/component'])).toEqual([
        'gateway',
        'worker',
        undefined,
      ]);
      expect(pg.spec.ingress[0].from[2]).toEqual(from[0]);
    });
    test('with from empty nobody may scrape (an ingress rule without from would admit everyone)', () => {
      const objs = render(v, ['default'], { 'networkPolicy.enabled': true });
      expect(find(objs, 'NetworkPolicy', GATEWAY).spec.ingress).toEqual([{ ports: [{ port: 8080, protocol: 'TCP' }] }]);
      expect(find(objs, 'NetworkPolicy', WORKER).spec.ingress).toEqual([]);
      expect(find(objs, 'NetworkPolicy', 'rel-kslate-postgres').spec.ingress[0].from).toHaveLength(2);
    });
    test('no database policy with an external database', () => {
      expect(ofKind(render(v, ['external-dsn'], { 'networkPolicy.enabled': true }), 'NetworkPolicy').map((o) => o.metadata.name)).toEqual([GATEWAY, WORKER]);
    });
  });

  describe('ServiceMonitor', () => {
    test('off by default', () => {
      expect(ofKind(render(v), 'ServiceMonitor')).toEqual([]);
    });
    test('one per metrics Service, selecting it, with interval and extra labels', () => {
      const objs = render(v, ['service-monitor']);
      for (const c of ['gateway', 'worker']) {
        const sm = find(objs, 'ServiceMonitor', `rel-kslate-${c}`);
        expect(sm.apiVersion).toBe('monitoring.coreos.com/v1');
        expect(sm.metadata.labels?.release).toBe('prometheus');
        expect(sm.spec.endpoints).toEqual([{ port: 'metrics', path: '/metrics', interval: '30s' }]);
        expect(sm.spec.namespaceSelector).toEqual({ matchNames: [NAMESPACE] });
        // The selector picks exactly the metrics Service of that component.
        const selected = ofKind(objs, 'Service').filter((s) => Object.entries(sm.spec.selector.matchLabels).every(([k, val]) => s.metadata.labels?.[k] === val));
        expect(selected.map((s) => s.metadata.name)).toEqual([`rel-kslate-${c}-metrics`]);
      }
      const noInterval = find(render(v, ['service-monitor'], { 'serviceMonitor.interval': '' }), 'ServiceMonitor', GATEWAY);
      expect(noInterval.spec.endpoints).toEqual([{ port: 'metrics', path: '/metrics' }]);
    });
  });

  describe('example', () => {
    test('off by default', () => {
      expect(render(v).filter((o) => ['SharedContext', 'Namespace'].includes(o.kind))).toEqual([]);
    });
    test('the Namespace, the incident SharedContext and the ServiceAccounts its roles name, in example.namespace', () => {
      const objs = render(v, ['example']);
      expect(find(objs, 'Namespace', 'kslate-example').metadata.namespace).toBeUndefined();
      const sc = find(objs, 'SharedContext', 'incident');
      expect(sc.apiVersion).toBe('kslate.dev/v1');
      expect(sc.metadata.namespace).toBe('kslate-example');
      const subjects: string[] = Object.values(sc.spec.roles as Record<string, { subjects: string[] }>).flatMap((r) => r.subjects);
      expect(subjects).toEqual(['k8s-sa:kslate-example/responder', 'k8s-sa:kslate-example/reviewer']);
      const sas = ofKind(objs, 'ServiceAccount').filter((s) => s.metadata.namespace === 'kslate-example');
      expect(sas.map((s) => `k8s-sa:${s.metadata.namespace}/${s.metadata.name}`).sort()).toEqual(subjects.sort());
    });
    test('the example SharedContext passes the CRD schema and the validation `kslate classes check` runs', () => {
      const sc = find(render(v, ['example']), 'SharedContext', 'incident');
      expect(validateAgainstCrd(sc)).toEqual({ ok: true });
      const parsed = parseManifest({ apiVersion: sc.apiVersion, kind: sc.kind, metadata: { name: sc.metadata.name, namespace: sc.metadata.namespace }, spec: sc.spec });
      expect(parsed.ok ? [] : parsed.problems).toEqual([]);
    });
    test('the @kslate/langgraph classes: the shipped specs, the graph role held by the responder', () => {
      const objs = render(v, ['example']);
      const shipped = parseAllDocuments(readFileSync(new URL('../../integrations/langgraph/classes/langgraph.yaml', import.meta.url), 'utf8')).map((d) => d.toJS());
      for (const c of shipped) {
        const sc = find(objs, 'SharedContext', c.metadata.name);
        expect(validateAgainstCrd(sc)).toEqual({ ok: true });
        expect(sc.spec.roles.graph.subjects).toEqual(['k8s-sa:kslate-example/responder']);
        expect({ ...sc.spec, roles: {} }).toEqual({ ...c.spec, roles: {} });
        const parsed = parseManifest({ apiVersion: sc.apiVersion, kind: sc.kind, metadata: { name: sc.metadata.name, namespace: sc.metadata.namespace }, spec: sc.spec });
        expect(parsed.ok ? [] : parsed.problems).toEqual([]);
      }
    });
    test('createNamespace false: no Namespace; another namespace is followed everywhere', () => {
      const objs = render(v, ['example'], { 'example.createNamespace': false, 'example.namespace': 'team-a' });
      expect(ofKind(objs, 'Namespace')).toEqual([]);
      expect(find(objs, 'SharedContext', 'incident').metadata.namespace).toBe('team-a');
      expect(JSON.stringify(find(objs, 'SharedContext', 'incident').spec.roles)).not.toMatch(/kslate-example/);
      expect(ofKind(objs, 'ServiceAccount').filter((s) => s.metadata.namespace === 'team-a')).toHaveLength(2);
    });
  });

  describe('pods', () => {
    const workloads = (objs: K8sObject[]) => objs.filter((o) => ['Deployment', 'StatefulSet'].includes(o.kind));
    test('every container: non-root, read-only root filesystem, no privilege escalation, no capabilities, RuntimeDefault seccomp', () => {
      const objs = render(v);
      expect(workloads(objs).map((o) => o.metadata.name).sort()).toEqual([GATEWAY, 'rel-kslate-postgres', WORKER]);
      for (const w of workloads(objs)) {
        const pod = w.spec.template.spec;
        expect(pod.securityContext, w.metadata.name).toMatchObject({ runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } });
        for (const c of [...pod.containers, ...(pod.initContainers ?? [])]) {
          expect(c.securityContext, `${w.metadata.name}/${c.name}`).toMatchObject({
            runAsNonRoot: true,
            readOnlyRootFilesystem: true,
            allowPrivilegeEscalation: false,
            capabilities: { drop: ['ALL'] },
            seccompProfile: { type: 'RuntimeDefault' },
          });
          // A read-only root needs a writable /tmp.
          expect(c.volumeMounts.some((m: { mountPath: string }) => m.mountPath === '/tmp'), `${w.metadata.name}/${c.name} /tmp`).toBe(true);
        }
      }
      for (const d of [GATEWAY, WORKER]) expect(container(find(objs, 'Deployment', d)).securityContext.runAsUser).toBe(10001);
    });
    test('the gateway outlives its preStop pause plus its 25 s drain', () => {
      const gw = find(render(v), 'Deployment', GATEWAY);
      const pause = container(gw).lifecycle.preStop.exec.command;
      expect(pause).toEqual(['node', '-e', 'setTimeout(() => {}, 5000)']);
      expect(gw.spec.template.spec.terminationGracePeriodSeconds).toBeGreaterThan(5 + 25);
    });
    test('image: tag defaults to the appVersion; repository, tag, pullPolicy and pullSecrets from values', () => {
      for (const w of workloads(render(v)).filter((o) => o.kind === 'Deployment')) {
        expect(container(w).image).toBe('kslate:0.9.0');
        expect(w.spec.template.spec.imagePullSecrets).toBeUndefined();
      }
      const objs = render(v, ['default'], { 'image.repository': 'registry.example.com/kslate', 'image.tag': '0.9.1', 'image.pullPolicy': 'Always', 'image.pullSecrets': ['regcred'] });
      for (const d of [GATEWAY, WORKER]) {
        const w = find(objs, 'Deployment', d);
        expect(container(w).image).toBe('registry.example.com/kslate:0.9.1');
        expect(container(w).imagePullPolicy).toBe('Always');
        expect(w.spec.template.spec.imagePullSecrets).toEqual([{ name: 'regcred' }]);
      }
    });
    test('per-component resources from values', () => {
      const objs = render(v, ['default'], { 'gateway.resources': { limits: { cpu: '2' } }, 'worker.resources': { requests: { memory: '64Mi' } }, 'postgres.resources': { limits: { memory: '1Gi' } } });
      expect(container(find(objs, 'Deployment', GATEWAY)).resources).toEqual({ requests: { cpu: '100m', memory: '128Mi' }, limits: { memory: '512Mi', cpu: '2' } });
      expect(container(find(objs, 'Deployment', WORKER)).resources.requests).toEqual({ cpu: '50m', memory: '64Mi' });
      expect(container(find(objs, 'StatefulSet', 'rel-kslate-postgres')).resources.limits).toEqual({ memory: '1Gi' });
    });
    test('standard labels on every object', () => {
      for (const o of render(v, ['example'])) {
        expect(o.metadata.labels, `${o.kind}/${o.metadata.name}`).toMatchObject({
          'app.kubernetes.io/name': 'kslate',
          'app.kubernetes.io/instance': 'rel',
          'app.kubernetes.io/version': '0.9.0',
          'app.kubernetes.io/managed-by': 'Helm',
          'helm.sh/chart': 'kslate-0.9.0',
        });
        expect(o.metadata.labels?.['app.kubernetes.io/component'], `${o.kind}/${o.metadata.name}`).toMatch(/^(gateway|worker|postgres|db|example)$/);
      }
    });
  });
});
