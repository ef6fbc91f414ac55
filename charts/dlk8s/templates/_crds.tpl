{{/*
One CRD of templates/crds.yaml (which `make chart-generate` writes from the
repository's crds/): the CRD as the file has it, plus the release's labels
(the file's own labels kept where they do not clash) and the annotations of
crds.annotations and crds.keep. Pass a dict with "ctx" (the root context),
"source" (the file it came from, for error messages) and "yaml" (its text).
*/}}
{{- define "dlk8s.crd" }}
{{- $crd := fromYaml .yaml }}
{{- if hasKey $crd "Error" }}
{{- fail (printf "%s is not valid YAML: %s" .source $crd.Error) }}
{{- end }}
{{- $labels := merge (include "dlk8s.labels" (dict "ctx" .ctx "component" "crd") | fromYaml) ($crd.metadata.labels | default dict) }}
{{- $annotations := deepCopy .ctx.Values.crds.annotations }}
{{- if .ctx.Values.crds.keep }}
{{- $_ := set $annotations "helm.sh/resource-policy" "keep" }}
{{- end }}
{{- $_ := set $crd.metadata "labels" $labels }}
{{- if $annotations }}
{{- $_ := set $crd.metadata "annotations" (merge $annotations ($crd.metadata.annotations | default dict)) }}
{{- end }}
---
{{ toYaml $crd }}
{{- end }}
