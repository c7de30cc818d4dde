{{/* Names, labels, the image, the database source and the checks every install passes. */}}

{{- define "kslate.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The release's base name: the release name alone when it already contains the chart name. */}}
{{- define "kslate.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* A component's object name, e.g. <fullname>-gateway (the base trimmed so the result fits 63). */}}
{{- define "kslate.componentName" -}}
{{- $root := index . 0 -}}{{- $component := index . 1 -}}
{{- printf "%s-%s" (include "kslate.fullname" $root | trunc (int (sub 62 (len $component))) | trimSuffix "-") $component -}}
{{- end -}}

{{- define "kslate.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Selector labels of one component: (list $ "gateway"). Never change these: selectors are immutable. */}}
{{- define "kslate.selectorLabels" -}}
{{- $root := index . 0 -}}
app.kubernetes.io/name: {{ include "kslate.name" $root }}
app.kubernetes.io/instance: {{ $root.Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{/* Standard labels of one component: (list $ "gateway"). */}}
{{- define "kslate.labels" -}}
{{- $root := index . 0 -}}
helm.sh/chart: {{ include "kslate.chart" $root }}
{{ include "kslate.selectorLabels" . }}
app.kubernetes.io/version: {{ $root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ $root.Release.Service }}
{{- end -}}

{{/* repository:tag, the tag defaulting to the chart's appVersion. */}}
{{- define "kslate.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion | toString) -}}
{{- end -}}

{{/* imagePullSecrets of a pod spec, or nothing. */}}
{{- define "kslate.pullSecrets" -}}
{{- if .Values.image.pullSecrets -}}
imagePullSecrets:
{{- range .Values.image.pullSecrets }}
  - name: {{ . | quote }}
{{- end }}
{{- end -}}
{{- end -}}

{{/* The identity providers as a list of trimmed names. */}}
{{- define "kslate.identities" -}}
{{- $out := list -}}
{{- range (splitList "," .Values.gateway.identity) -}}
{{- $p := trim . -}}
{{- if $p -}}{{- $out = append $out $p -}}{{- end -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}

{{/* "true" when gateway.identity names the provider: (list $ "apikey"). */}}
{{- define "kslate.hasIdentity" -}}
{{- $root := index . 0 -}}
{{- if has (index . 1) (include "kslate.identities" $root | fromJsonArray) -}}true{{- end -}}
{{- end -}}

{{/* The Secret and key holding the DSN (KSLATE_DATABASE_URL). */}}
{{- define "kslate.dsnSecretName" -}}
{{- if .Values.external.existingSecret -}}
{{- .Values.external.existingSecret -}}
{{- else -}}
{{- include "kslate.componentName" (list . "db") -}}
{{- end -}}
{{- end -}}

{{- define "kslate.dsnSecretKey" -}}
{{- if .Values.external.existingSecret -}}
{{- .Values.external.existingSecretKey | default "dsn" -}}
{{- else -}}
dsn
{{- end -}}
{{- end -}}

{{/* The DSN the chart's own Secret holds: external.dsn, or the bundled PostgreSQL's. */}}
{{- define "kslate.dsn" -}}
{{- if .Values.external.dsn -}}
{{- .Values.external.dsn -}}
{{- else -}}
{{- $p := .Values.postgres -}}
{{- /* urlquery escapes a space as "+": in a URL's userinfo that must be %20. */ -}}
{{- $pw := urlquery $p.password | replace "+" "%20" -}}
{{- printf "postgres://%s:%s@%s.%s.svc:5432/%s?sslmode=disable" (urlquery $p.user) $pw (include "kslate.componentName" (list . "postgres")) .Release.Namespace (urlquery $p.database) -}}
{{- end -}}
{{- end -}}

{{/* Every cross-value rule, checked once (included by the gateway Deployment, which always renders). */}}
{{- define "kslate.validate" -}}
{{- $sources := list -}}
{{- if .Values.postgres.enabled }}{{ $sources = append $sources "postgres.enabled=true" }}{{ end -}}
{{- if .Values.external.dsn }}{{ $sources = append $sources "external.dsn" }}{{ end -}}
{{- if .Values.external.existingSecret }}{{ $sources = append $sources "external.existingSecret" }}{{ end -}}
{{- if eq (len $sources) 0 -}}
{{- fail "no database configured: set external.existingSecret (and external.existingSecretKey, default dsn) or external.dsn for an external PostgreSQL, or postgres.enabled=true for the bundled development database" -}}
{{- end -}}
{{- if gt (len $sources) 1 -}}
{{- fail (printf "more than one database source configured (%s): set exactly one of postgres.enabled=true, external.dsn, external.existingSecret (set postgres.enabled=false to use an external database)" (join ", " $sources)) -}}
{{- end -}}
{{- if .Values.postgres.enabled -}}
{{- if not .Values.postgres.password -}}
{{- fail "postgres.password is empty: set postgres.password for the bundled PostgreSQL, or use external.dsn / external.existingSecret" -}}
{{- end -}}
{{- if and (eq .Values.postgres.password "kslate-dev-password") (not .Values.postgres.allowDefaultPassword) -}}
{{- fail "postgres.password is the default kslate-dev-password: set postgres.password, or postgres.allowDefaultPassword=true for a throwaway dev install, or use an external database (postgres.enabled=false with external.dsn or external.existingSecret)" -}}
{{- end -}}
{{- end -}}
{{- range (include "kslate.identities" . | fromJsonArray) -}}
{{- if not (has . (list "k8s-sa" "oidc" "apikey")) -}}
{{- fail (printf "gateway.identity names unknown provider %q: use k8s-sa, oidc and/or apikey, comma-separated" .) -}}
{{- end -}}
{{- end -}}
{{- if eq (len (include "kslate.identities" . | fromJsonArray)) 0 -}}
{{- fail "gateway.identity is empty: name at least one of k8s-sa, oidc, apikey" -}}
{{- end -}}
{{- if and (include "kslate.hasIdentity" (list . "apikey")) (not .Values.gateway.apikeysSecret) -}}
{{- fail "gateway.identity includes apikey but gateway.apikeysSecret is empty: set gateway.apikeysSecret to an existing Secret holding the key file (key gateway.apikeysSecretKey, default apikeys.yaml)" -}}
{{- end -}}
{{- if and (include "kslate.hasIdentity" (list . "apikey")) (not .Values.gateway.apikeysSecretKey) -}}
{{- fail "gateway.apikeysSecretKey is empty: name the key of gateway.apikeysSecret that holds the key file (default apikeys.yaml)" -}}
{{- end -}}
{{- if include "kslate.hasIdentity" (list . "oidc") -}}
{{- if or (not .Values.gateway.oidc.issuer) (not .Values.gateway.oidc.audience) -}}
{{- fail "gateway.identity includes oidc: set gateway.oidc.issuer and gateway.oidc.audience" -}}
{{- end -}}
{{- end -}}
{{- with .Values.gateway.limits -}}
{{- if gt (int .maxConnsPerAddress) (int .maxConns) -}}
{{- fail (printf "gateway.limits.maxConnsPerAddress (%d) is above gateway.limits.maxConns (%d): one address could take every connection; lower it (0 = no per-address cap)" (int .maxConnsPerAddress) (int .maxConns)) -}}
{{- end -}}
{{- if gt (int .watchMaxStreamsPerIdentity) (int .watchMaxStreams) -}}
{{- fail (printf "gateway.limits.watchMaxStreamsPerIdentity (%d) is above gateway.limits.watchMaxStreams (%d): lower it, so one identity cannot take every stream" (int .watchMaxStreamsPerIdentity) (int .watchMaxStreams)) -}}
{{- end -}}
{{- if gt (int .mcpMaxSessionsPerIdentity) (int .mcpMaxSessions) -}}
{{- fail (printf "gateway.limits.mcpMaxSessionsPerIdentity (%d) is above gateway.limits.mcpMaxSessions (%d): lower it, so one identity cannot take every session" (int .mcpMaxSessionsPerIdentity) (int .mcpMaxSessions)) -}}
{{- end -}}
{{- end -}}
{{- if and (include "kslate.hasIdentity" (list . "k8s-sa")) (not .Values.gateway.k8sAudience) -}}
{{- fail "gateway.identity includes k8s-sa but gateway.k8sAudience is empty: set the audience agents' projected tokens are issued for (default kslate)" -}}
{{- end -}}
{{- if and .Values.tls.enabled (not .Values.tls.secretName) -}}
{{- fail "tls.enabled is true but tls.secretName is empty: set tls.secretName to a kubernetes.io/tls Secret (tls.crt, tls.key) in the release namespace" -}}
{{- end -}}
{{- /* Ports of one container must differ: the second listen would fail at start (EADDRINUSE). */ -}}
{{- $gw := .Values.gateway -}}
{{- $gwPorts := list (list "gateway.listenPort" (int $gw.listenPort)) (list "gateway.metricsPort" (int $gw.metricsPort)) -}}
{{- if gt (int $gw.grpcPort) 0 }}{{ $gwPorts = append $gwPorts (list "gateway.grpcPort" (int $gw.grpcPort)) }}{{ end -}}
{{- $wkPorts := list (list "worker.healthPort" (int .Values.worker.healthPort)) (list "worker.metricsPort" (int .Values.worker.metricsPort)) -}}
{{- range $ports := list $gwPorts $wkPorts -}}
{{- range $i, $a := $ports -}}
{{- range $j, $b := $ports -}}
{{- if and (lt $i $j) (eq (index $a 1) (index $b 1)) -}}
{{- fail (printf "%s and %s are both %d: one container cannot listen twice on a port; give each its own" (index $a 0) (index $b 0) (index $a 1)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- /* A budget no eviction can satisfy blocks every node drain and cluster upgrade. Kubernetes
  rounds a percentage up, so minAvailable p% of r replicas leaves none to evict when r*p > 100*(r-1). */ -}}
{{- $pdb := $gw.podDisruptionBudget -}}
{{- $replicas := int $gw.replicas -}}
{{- if and $pdb.enabled (gt $replicas 1) -}}
{{- $min := toString $pdb.minAvailable -}}
{{- $blocks := false -}}
{{- if hasSuffix "%" $min -}}
{{- $blocks = gt (mul $replicas (atoi (trimSuffix "%" $min))) (mul 100 (sub $replicas 1)) -}}
{{- else -}}
{{- $blocks = ge (atoi $min) $replicas -}}
{{- end -}}
{{- if $blocks -}}
{{- fail (printf "gateway.podDisruptionBudget.minAvailable %s with gateway.replicas %d lets no gateway pod be evicted, so every node drain and cluster upgrade would hang: set minAvailable below the replicas (e.g. %d), raise gateway.replicas, or set gateway.podDisruptionBudget.enabled=false" $min $replicas (sub $replicas 1)) -}}
{{- end -}}
{{- end -}}
{{- if and .Values.example.enabled (not .Values.example.namespace) -}}
{{- fail "example.enabled is true but example.namespace is empty: set example.namespace" -}}
{{- end -}}
{{- end -}}

{{/* Pod and container security contexts of the kslate containers (gateway, worker). */}}
{{- define "kslate.podSecurityContext" -}}
securityContext:
  runAsNonRoot: true
  runAsUser: 10001
  runAsGroup: 10001
  fsGroup: 10001
  seccompProfile:
    type: RuntimeDefault
{{- end -}}

{{- define "kslate.containerSecurityContext" -}}
{{- $uid := . | default 10001 -}}
securityContext:
  runAsNonRoot: true
  runAsUser: {{ $uid }}
  runAsGroup: {{ $uid }}
  readOnlyRootFilesystem: true
  allowPrivilegeEscalation: false
  capabilities:
    drop: [ALL]
  seccompProfile:
    type: RuntimeDefault
{{- end -}}
