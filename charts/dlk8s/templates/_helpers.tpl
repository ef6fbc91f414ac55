{{/*
Chart name, cut to 63 characters because some Kubernetes name fields are
limited to that (by the DNS naming spec).
*/}}
{{- define "dlk8s.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Full name of the release's resources. The release name alone when it already
contains the chart name, so `helm install dlk8s` does not give dlk8s-dlk8s.
*/}}
{{- define "dlk8s.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "dlk8s.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Labels on every resource: the chart's own, then commonLabels (the schema
keeps those from repeating a key of the chart's). Pass a dict with "ctx" (the
root context) and "component".
*/}}
{{- define "dlk8s.labels" -}}
helm.sh/chart: {{ include "dlk8s.chart" .ctx }}
{{ include "dlk8s.selectorLabels" . }}
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
app.kubernetes.io/part-of: dlk8s
{{- with .ctx.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
Selector labels. The component keeps the metrics Service from selecting the
`helm test` pod.
*/}}
{{- define "dlk8s.selectorLabels" -}}
app.kubernetes.io/name: {{ include "dlk8s.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "dlk8s.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "dlk8s.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
The operator image: [registry/]repository, then @digest when one is given (a
digest names exactly one image, so the tag adds nothing) or :tag.
*/}}
{{- define "dlk8s.image" -}}
{{- $repository := .Values.image.repository }}
{{- with .Values.image.registry }}
{{- $repository = printf "%s/%s" . $repository }}
{{- end }}
{{- if .Values.image.digest }}
{{- printf "%s@%s" $repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" $repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/*
Where the operator finds its files. The operator reads the config from
DLK8S_CONFIG_FILE; the config names the gRPC server script's path.
*/}}
{{- define "dlk8s.configDir" -}}/etc/dlk8s/config{{- end }}
{{- define "dlk8s.configKey" -}}controller_config_file.yaml{{- end }}
{{- define "dlk8s.grpcDir" -}}/etc/dlk8s/grpc{{- end }}
{{- define "dlk8s.grpcKey" -}}grpc_tensorflow_server.py{{- end }}

{{- define "dlk8s.configMapName" -}}
{{- default (printf "%s-config" (include "dlk8s.fullname" .)) .Values.config.existingConfigMap }}
{{- end }}

{{- define "dlk8s.grpcConfigMapName" -}}
{{- printf "%s-grpc" (include "dlk8s.fullname" .) }}
{{- end }}

{{- define "dlk8s.leaderElectionId" -}}
{{- printf "%s-leader" (include "dlk8s.fullname" .) }}
{{- end }}

{{/*
"true" or "false": leader election is on when asked for, or, when left null,
exactly when more than one operator pod runs.
*/}}
{{- define "dlk8s.leaderElect" -}}
{{- $enabled := .Values.operator.leaderElection.enabled }}
{{- if kindIs "invalid" $enabled }}
{{- gt (int .Values.replicaCount) 1 | toString }}
{{- else }}
{{- $enabled | toString }}
{{- end }}
{{- end }}

{{/*
Namespace the operator watches: all ("") for a cluster-wide install, the
release namespace when its permissions end there.
*/}}
{{- define "dlk8s.watchNamespace" -}}
{{- if eq .Values.rbac.scope "namespace" }}{{ .Release.Namespace }}{{ end }}
{{- end }}

{{/*
"true" or "false": the PaddleJob autoscaler reads nodes, which only a
cluster-wide install may.
*/}}
{{- define "dlk8s.autoscalerEnabled" -}}
{{- and .Values.autoscaler.enabled (eq .Values.rbac.scope "cluster") | toString }}
{{- end }}

{{/*
The operator's rules on cluster-scoped objects that --kueue reads: in its
ClusterRole, or with rbac.scope=namespace in a ClusterRole of their own.
*/}}
{{- define "dlk8s.kueueClusterRules" -}}
# ResourceFlavors give an admitted pod its node labels and tolerations;
# WorkloadPriorityClasses, a job's kueue.x-k8s.io/priority-class.
- apiGroups: [kueue.x-k8s.io]
  resources: [resourceflavors, workloadpriorityclasses]
  verbs: [list, watch]
# A Workload's priority without that label: its pods' PriorityClass, or the globalDefault one.
- apiGroups: [scheduling.k8s.io]
  resources: [priorityclasses]
  verbs: [list, watch]
{{- end }}

{{/*
The accelerators the operator knows: the selected cloud's preset, with each
resource listed in config.accelerators replacing the preset's entry for it.
Entries are whole units (a volume list cannot be merged item by item in any
way that users could predict), so this merges one level deep only.
*/}}
{{- define "dlk8s.accelerators" -}}
{{- $accelerators := dict }}
{{- if .Values.cloud }}
{{- $preset := index .Values.cloudPresets .Values.cloud }}
{{- range $resource, $entry := $preset.accelerators }}
{{- $_ := set $accelerators $resource $entry }}
{{- end }}
{{- end }}
{{- range $resource, $entry := .Values.config.accelerators }}
{{- $_ := set $accelerators $resource $entry }}
{{- end }}
{{- $normalized := dict }}
{{- range $resource, $entry := $accelerators }}
{{- $_ := set $normalized $resource (dict "volumes" (default list $entry.volumes) "envVars" (default list $entry.envVars)) }}
{{- end }}
{{- toYaml $normalized }}
{{- end }}

{{/*
The controller config file the operator reads (DLK8S_CONFIG_FILE).
*/}}
{{- define "dlk8s.controllerConfig" -}}
{{- $config := dict
      "accelerators" (include "dlk8s.accelerators" . | fromYaml)
      "tfImage" .Values.config.tfImage
      "images" (dict "redis" .Values.config.images.redis "etcd" .Values.config.images.etcd)
      "grpcServerFilePath" (printf "%s/%s" (include "dlk8s.grpcDir" .) (include "dlk8s.grpcKey" .)) }}
{{- toYaml $config }}
{{- end }}

{{/*
Flags of `dlk8s-operator` that the chart sets from values (as DLK8S_*
variables or from what else it renders), mapped to the value to use instead.
A flag given again in operator.extraArgs would win over the variable and
leave the RBAC, rollout strategy or probes the chart derived from the value
wrong.
*/}}
{{- define "dlk8s.chartFlags" -}}
--namespace: rbac.scope
--config-file: config (config.accelerators or config.existingConfigMap)
--workers: operator.workers
--leader-elect: operator.leaderElection.enabled
--leader-election-namespace: the release namespace (not configurable)
--leader-election-id: the release name (not configurable)
--metrics-addr: metrics.port
--metrics-cert-dir: metrics.tls (the chart mounts the certificate's Secret)
--probe-addr: probes.port
--autoscaler: autoscaler.enabled
--no-autoscaler: autoscaler.enabled
--kueue: kueue.enabled
--log-level: operator.logLevel
--kubeconfig: nothing (the operator uses its ServiceAccount)
{{- end }}

{{/*
The arguments of `dlk8s-operator run`: operator.extraArgs, refusing the flags
that dlk8s.chartFlags lists.
*/}}
{{- define "dlk8s.operatorArgs" -}}
{{- $chartFlags := include "dlk8s.chartFlags" . | fromYaml }}
{{- range .Values.operator.extraArgs }}
{{- $flag := regexReplaceAll "=.*$" . "" }}
{{- if hasKey $chartFlags $flag }}
{{- fail (printf "operator.extraArgs: %s is set by the chart; use %s instead" $flag (get $chartFlags $flag)) }}
{{- end }}
{{- end }}
{{- toYaml (prepend .Values.operator.extraArgs "run") }}
{{- end }}

{{/*
The label matchers that pick this operator's series, for the alerting rules:
metrics.prometheusRule.selector, or what the chart's ServiceMonitor gives
(Prometheus Operator names the job after the Service). "own" adds the
release namespace, which holds for the operator's own figures but not for
the lifecycle counters, whose `namespace` is the job's (honorLabels).
Pass a dict with "ctx" and "own" (bool).
*/}}
{{- define "dlk8s.metricsSelector" -}}
{{- if .ctx.Values.metrics.prometheusRule.selector }}
{{- .ctx.Values.metrics.prometheusRule.selector }}
{{- else }}
{{- printf "job=%q" (printf "%s-metrics" (include "dlk8s.fullname" .ctx)) }}
{{- if .own }}{{ printf ",namespace=%q" .ctx.Release.Namespace }}{{ end }}
{{- end }}
{{- end }}

{{/*
Combinations that the schema cannot express, reported with what to do.
*/}}
{{- define "dlk8s.validate" -}}
{{- if .Values.config.existingConfigMap }}
{{- if .Values.cloud }}
{{- fail (printf "config.existingConfigMap (%q) and cloud (%q) exclude each other: the GPU config comes from your ConfigMap, so leave cloud empty (\"\")" .Values.config.existingConfigMap .Values.cloud) }}
{{- end }}
{{- if .Values.config.accelerators }}
{{- fail (printf "config.existingConfigMap (%q) and config.accelerators exclude each other: put the accelerators into your ConfigMap's controller_config_file.yaml" .Values.config.existingConfigMap) }}
{{- end }}
{{- end }}
{{- end }}

{{/*
The Secret of the metrics port's certificate (templates/metrics-tls.yaml).
*/}}
{{- define "dlk8s.metricsSecretName" -}}
{{- printf "%s-metrics-tls" (include "dlk8s.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The name the metrics certificate is for, and the one the ServiceMonitor asks
for: the metrics Service's in-cluster name.
*/}}
{{- define "dlk8s.metricsServerName" -}}
{{- printf "%s-metrics.%s.svc" (include "dlk8s.fullname" .) .Release.Namespace }}
{{- end }}

{{/*
Where the operator reads the metrics certificate (DLK8S_METRICS_CERT_DIR).
*/}}
{{- define "dlk8s.metricsCertDir" -}}
/etc/dlk8s/metrics-certs
{{- end }}

{{/*
"true" when jobs get NetworkPolicies: networkPolicy.enabled, or with null
whether a DaemonSet of a known enforcer runs in the cluster.
*/}}
{{- define "dlk8s.networkPolicies" -}}
{{- if kindIs "bool" .Values.networkPolicy.enabled }}
{{- .Values.networkPolicy.enabled | toString }}
{{- else }}
{{- $found := false }}
{{- range (lookup "apps/v1" "DaemonSet" "" "").items | default list }}
{{- if has .metadata.name $.Values.networkPolicy.enforcers }}{{ $found = true }}{{ end }}
{{- end }}
{{- $found | toString }}
{{- end }}
{{- end }}
