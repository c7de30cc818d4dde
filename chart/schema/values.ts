/**
 * The chart's values (chart/values.yaml) as one valibot schema: the single source of
 * chart/values.schema.json (`npm run chart:generate`). Every mapping is a strictObject, so
 * a misspelt key fails `helm lint` / `helm install` instead of silently keeping a default;
 * only maps whose keys belong to Kubernetes (resource names, labels, NetworkPolicy peers)
 * are open.
 */
import * as v from 'valibot';

const describe = v.description;

const port = (what: string) => v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(65535), describe(what));
const flag = (what: string) => v.pipe(v.boolean(), describe(what));
const text = (what: string) => v.pipe(v.string(), describe(what));
const nonEmpty = (what: string) => v.pipe(v.string(), v.minLength(1), describe(what));

// Go's time.ParseDuration form, as the worker's --sweep-interval takes it (decisions §1).
const GO_DURATION = /^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$/;
// Prometheus durations (ServiceMonitor interval); empty = Prometheus' default.
const PROM_DURATION = /^$|^([0-9]+(ms|s|m|h|d|w|y))+$/;
const PROVIDER = '(k8s-sa|oidc|apikey)';
const IDENTITY = new RegExp(`^ *${PROVIDER} *(, *${PROVIDER} *)*$`);
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
const DNS_LABEL_OR_EMPTY = /^$|^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
const DNS_SUBDOMAIN_OR_EMPTY = /^$|^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
// A Kubernetes resource.Quantity: 100m, 1.5, 128Mi, 1e3.
const QUANTITY = /^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)(([KMGTPE]i)|[numkMGTPE]|[eE][+-]?[0-9]+)?$/;

/** A container's requests/limits: resource name → quantity (a free-form map, as in a Pod spec). */
const quantities = (what: string) => v.pipe(
  v.record(v.string(), v.union([v.pipe(v.string(), v.regex(QUANTITY)), v.number()])),
  describe(what),
);

/** A whole number from `min` to a million, for the gateway's count flags. */
const count = (min: number, what: string) => v.pipe(v.number(), v.integer(), v.minValue(min), v.maxValue(1_000_000), describe(what));

const resources = (component: string) => v.pipe(
  v.strictObject({
    requests: v.optional(quantities(`Resource requests of the ${component} container (cpu, memory, ...).`)),
    limits: v.optional(quantities(`Resource limits of the ${component} container (cpu, memory, ...).`)),
  }),
  describe(`Resources of the ${component} container (a Kubernetes ResourceRequirements without claims).`),
);

export const ValuesSchema = v.pipe(v.strictObject({
  image: v.pipe(v.strictObject({
    repository: nonEmpty('Image repository. No images are published: build one from the repository\'s Dockerfile and push it where the cluster can pull it.'),
    tag: text('Image tag; empty = the chart\'s appVersion.'),
    pullPolicy: v.pipe(v.picklist(['Always', 'IfNotPresent', 'Never']), describe('Image pull policy.')),
    pullSecrets: v.pipe(v.array(v.pipe(v.string(), v.regex(DNS_SUBDOMAIN_OR_EMPTY), v.minLength(1))), describe('Names of image pull Secrets in the release namespace.')),
  }), describe('The kslate image that the gateway and the worker run.')),

  gateway: v.pipe(v.strictObject({
    replicas: v.pipe(v.number(), v.integer(), v.minValue(1), describe('Gateway replicas; a PodDisruptionBudget is rendered only when more than 1.')),
    listenPort: port('HTTP/JSON and MCP port (the Service\'s port 80 targets it).'),
    grpcPort: v.pipe(v.number(), v.integer(), v.minValue(0), v.maxValue(65535), describe('gRPC port; 0 disables gRPC.')),
    metricsPort: port('Port of /metrics, /readyz and /healthz.'),
    identity: v.pipe(v.string(), v.regex(IDENTITY), describe('Identity providers in order, comma-separated: k8s-sa, oidc, apikey.')),
    ui: flag('Serve the read-only web console at /ui on the API port (--ui); false turns it off.'),
    uiSessionTtl: v.pipe(v.string(), v.regex(GO_DURATION), describe('How long a console sign-in lasts (--ui-session-ttl), a Go duration from 1s to 720h such as 8h.')),
    k8sAudience: nonEmpty('The audience a k8s-sa token must be issued for (the agents\' projected token audience).'),
    apikeysSecret: text('An existing Secret holding the API key file; required when identity includes apikey.'),
    apikeysSecretKey: nonEmpty('The key of apikeysSecret that holds the API key file.'),
    oidc: v.pipe(v.strictObject({
      issuer: text('OIDC issuer URL; required when identity includes oidc.'),
      audience: text('The audience an OIDC token must carry; required when identity includes oidc.'),
      jwksUrl: text('JWKS URL; empty = discovered from the issuer.'),
      usernameClaim: nonEmpty('The claim that names the caller (oidc:<claim value>).'),
    }), describe('OIDC identity settings.')),
    podDisruptionBudget: v.pipe(v.strictObject({
      enabled: flag('Render a PodDisruptionBudget for the gateway (only when replicas > 1).'),
      minAvailable: v.pipe(
        v.union([v.pipe(v.number(), v.integer(), v.minValue(0)), v.pipe(v.string(), v.regex(/^[0-9]+%$/))]),
        describe('minAvailable of the PodDisruptionBudget: a number of pods or a percentage such as 50%; it must leave at least one gateway pod evictable (below replicas), or node drains would hang.'),
      ),
    }), describe('The gateway\'s PodDisruptionBudget.')),
    resources: resources('gateway'),
    limits: v.pipe(v.strictObject({
      maxConns: count(1, 'Concurrent connections per port (--max-conns).'),
      maxConnsPerAddress: count(0, 'Connections per port from one client address (--max-conns-per-address), at most maxConns; 0 = no cap. Behind an ingress or a load balancer that hides client addresses every client shares the proxy\'s: raise it or set 0.'),
      watchMaxStreams: count(1, 'Open watch streams per replica (--watch-max-streams).'),
      watchMaxStreamsPerIdentity: count(1, 'Open watch streams of one identity per replica (--watch-max-streams-per-identity), at most watchMaxStreams.'),
      mcpMaxSessions: count(1, 'MCP sessions per replica (--mcp-max-sessions).'),
      mcpMaxSessionsPerIdentity: count(1, 'MCP sessions of one identity per replica (--mcp-max-sessions-per-identity), at most mcpMaxSessions.'),
    }), describe('Capacity limits of each replica; the per-identity and per-address caps must not exceed their totals.')),
    dbPoolSize: v.pipe(
      v.number(),
      v.integer(),
      v.minValue(0),
      v.maxValue(1000),
      describe('Database connections per replica for requests (--db-pool-size); 0 = the gateway\'s default (10). Keep replicas x this near twice PostgreSQL\'s cores and below its max_connections.'),
    ),
    allowAsyncReplication: flag(
      'Accept a primary without a synchronous standby (--allow-async-replication): no warning at start or in /readyz. A failover may then lose acknowledged writes (docs/ha.md). The bundled postgres (one pod, no failover) implies it.',
    ),
    replicaMaxLag: v.pipe(
      v.string(),
      v.regex(GO_DURATION),
      describe('A read without X-Kslate-Min-Lsn uses a standby only while its replay lag is under this (--replica-max-lag), a Go duration such as 1s.'),
    ),
    replicaWait: v.pipe(
      v.string(),
      v.regex(GO_DURATION),
      describe('A read with X-Kslate-Min-Lsn waits at most this long for a standby to replay it, then reads from the primary (--replica-wait), a Go duration such as 50ms.'),
    ),
    writeLsn: v.pipe(
      v.picklist(['auto', 'on', 'off']),
      describe('Answer every write with X-Kslate-Lsn, its read-your-writes token, at one more database round trip per write (--write-lsn): auto when standbys are given, on, off.'),
    ),
    writeBatching: v.pipe(
      v.picklist(['on', 'off']),
      describe('Coalesce puts, appends, claims and transactions that arrive while write statements are in flight into one statement and one commit, each with its own outcome (--write-batching): on, off. Always off on Citus.'),
    ),
    idempotencyTtl: v.pipe(
      v.string(),
      v.regex(GO_DURATION),
      describe('How long a write\'s Idempotency-Key and its stored answer are kept (--idempotency-ttl), a Go duration such as 24h.'),
    ),
    maxHeapMB: v.pipe(
      v.number(),
      v.integer(),
      v.minValue(0),
      describe('V8 old-generation limit in MiB (NODE_OPTIONS=--max-old-space-size); 0 = Node\'s default. Keep it at about 75% of resources.limits.memory.'),
    ),
    maxSemiSpaceMB: v.pipe(
      v.number(),
      v.integer(),
      v.minValue(0),
      v.maxValue(256),
      describe('V8 young-generation semi-space limit in MiB (NODE_OPTIONS=--max-semi-space-size); 0 = Node\'s default (16). 64 collects less often and cut the put p99 at half load in the bench (12-15 -> 9.8 ms) for ~110 MB more RSS; raise resources.limits.memory with it.'),
    ),
  }), describe('The gateway Deployment (HTTP/JSON, MCP and gRPC).')),

  worker: v.pipe(v.strictObject({
    interval: v.pipe(v.string(), v.regex(GO_DURATION), describe('Sweep interval, a Go/Kubernetes duration such as 60s, 5m or 1h30m.')),
    healthPort: port('Port of the worker\'s /readyz and /healthz.'),
    metricsPort: port('Port of the worker\'s /metrics.'),
    resources: resources('worker'),
  }), describe('The worker Deployment (one replica: classes, role mirroring, expiry).')),

  watchNamespace: v.pipe(v.string(), v.regex(DNS_LABEL_OR_EMPTY), describe('Namespace watched for SharedContext objects; empty = every namespace (ClusterRole).')),

  tls: v.pipe(v.strictObject({
    enabled: flag('Serve HTTPS (and gRPC over TLS) with the certificate of secretName.'),
    secretName: v.pipe(v.string(), v.regex(DNS_SUBDOMAIN_OR_EMPTY), describe('A kubernetes.io/tls Secret (tls.crt, tls.key) in the release namespace; required when enabled.')),
  }), describe('TLS for the gateway.')),

  postgres: v.pipe(v.strictObject({
    enabled: flag('Run the bundled single-pod development PostgreSQL; set false and configure external for anything beyond development.'),
    image: nonEmpty('PostgreSQL image of the bundled database.'),
    user: nonEmpty('Database user of the bundled database.'),
    database: nonEmpty('Database name of the bundled database.'),
    password: nonEmpty('Password of the bundled database; the default is refused unless allowDefaultPassword is true.'),
    allowDefaultPassword: flag('Accept the default password (development only).'),
    storage: v.pipe(v.strictObject({
      size: v.pipe(v.string(), v.regex(QUANTITY), describe('Size of the database volume (a Kubernetes quantity such as 1Gi).')),
      storageClass: text('StorageClass of the database volume; empty = the cluster\'s default.'),
    }), describe('The bundled database\'s PersistentVolumeClaim.')),
    resources: resources('postgres'),
  }), describe('Bundled development PostgreSQL (StatefulSet, PVC, Service).')),

  external: v.pipe(v.strictObject({
    dsn: text('DSN of an external PostgreSQL (use sslmode=require or stronger).'),
    existingSecret: text('An existing Secret holding the DSN (instead of dsn).'),
    existingSecretKey: nonEmpty('The key of existingSecret that holds the DSN.'),
    replicaDsns: v.pipe(
      v.array(v.pipe(v.string(), v.regex(/^postgres(ql)?:\/\//), describe('A postgres:// DSN of a streaming standby.'))),
      describe('Streaming standbys that serve reads (--database-replica-url; docs/ha.md), kept in a Secret the chart creates.'),
    ),
    replicaExistingSecret: text('An existing Secret holding the standbys\' DSNs, comma-separated (instead of replicaDsns).'),
    replicaExistingSecretKey: nonEmpty('The key of replicaExistingSecret that holds the DSNs.'),
    databaseMode: v.pipe(
      v.picklist(['auto', 'plain', 'citus']),
      describe('--database-mode of the gateway and the worker: citus when the DSN names a Citus coordinator (the schema is distributed by record; docs/scale-out.md), plain for one PostgreSQL, auto to follow the citus extension. citus refuses to start on a database without the extension.'),
    ),
  }), describe('An external PostgreSQL: exactly one of postgres.enabled, external.dsn and external.existingSecret.')),

  networkPolicy: v.pipe(v.strictObject({
    enabled: flag('Render NetworkPolicies for the metrics ports and the bundled database.'),
    from: v.pipe(
      v.array(v.pipe(v.looseObject({}), describe('A Kubernetes NetworkPolicyPeer (podSelector / namespaceSelector / ipBlock).'))),
      describe('NetworkPolicy peers that may scrape the metrics ports and reach the bundled database.'),
    ),
  }), describe('NetworkPolicies.')),

  serviceMonitor: v.pipe(v.strictObject({
    enabled: flag('Render Prometheus Operator ServiceMonitors for both metrics Services.'),
    interval: v.pipe(v.string(), v.regex(PROM_DURATION), describe('Scrape interval such as 30s; empty = Prometheus\' default.')),
    labels: v.pipe(v.record(v.string(), v.string()), describe('Extra labels for the ServiceMonitors (e.g. release: prometheus).')),
  }), describe('Prometheus Operator ServiceMonitors.')),

  example: v.pipe(v.strictObject({
    enabled: flag('Install the example class (a SharedContext) and its service accounts.'),
    createNamespace: flag('Create example.namespace.'),
    namespace: v.pipe(v.string(), v.regex(DNS_LABEL), describe('Namespace of the example class and its service accounts.')),
  }), describe('The example class.')),
}), v.title('kslate chart values'), describe('Values of the kslate chart; unknown keys are refused at every level (except Kubernetes maps: resources, labels, NetworkPolicy peers).'));

export type Values = v.InferOutput<typeof ValuesSchema>;
