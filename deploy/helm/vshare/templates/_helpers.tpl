{{/* Labels every object carries. */}}
{{- define "vshare.labels" -}}
app.kubernetes.io/part-of: vshare
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | quote }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Image reference: registry/repository:tag, the tag defaulting to appVersion. */}}
{{- define "vshare.image" -}}
{{- $tag := .root.Values.image.tag | default .root.Chart.AppVersion -}}
{{- printf "%s/%s:%s" .root.Values.image.registry .repository $tag -}}
{{- end -}}

{{/* Selector labels of the scheduler: app=<name>, as Volcano's installer uses,
     so this Deployment can replace Volcano's (selectors are immutable). */}}
{{- define "vshare.scheduler.selector" -}}
app: {{ .Values.scheduler.name }}
{{- end -}}

{{- define "vshare.devicePlugin.selector" -}}
app: {{ .Values.devicePlugin.name }}
{{- end -}}

{{/* The device ConfigMap the plugin arguments and the agents name. */}}
{{- define "vshare.deviceConfig.name" -}}
{{- .Values.deviceshare.KnownGeometriesCMName | default .Values.deviceConfig.name -}}
{{- end -}}
{{- define "vshare.deviceConfig.namespace" -}}
{{- .Values.deviceshare.KnownGeometriesCMNamespace | default .Values.deviceConfig.namespace -}}
{{- end -}}

{{/* volcano-scheduler.conf: the configured tiers with deviceshare appended
     to tier deviceshareTier, its arguments from .Values.deviceshare. */}}
{{- define "vshare.scheduler.conf" -}}
{{- if .Values.scheduler.confOverride -}}
{{ .Values.scheduler.confOverride }}
{{- else -}}
{{- $s := .Values.scheduler -}}
{{- if ge (int $s.deviceshareTier) (len $s.tiers) -}}
{{- fail (printf "scheduler.deviceshareTier=%v: want an index into scheduler.tiers (0..%d)" $s.deviceshareTier (sub (len $s.tiers) 1)) -}}
{{- end -}}
actions: {{ $s.actions | quote }}
tiers:
{{- range $i, $tier := $s.tiers }}
- plugins:
  {{- range $tier.plugins }}
  {{- if eq .name "deviceshare" }}
  {{- fail "scheduler.tiers: leave deviceshare out; the chart adds it from the deviceshare values" }}
  {{- end }}
  - {{ toYaml . | indent 4 | trim }}
  {{- end }}
  {{- if eq $i (int $s.deviceshareTier) }}
  - name: deviceshare
    arguments:
      {{- range $k, $v := $.Values.deviceshare }}
      {{- if eq $k "KnownGeometriesCMName" }}
      deviceshare.{{ $k }}: {{ include "vshare.deviceConfig.name" $ | quote }}
      {{- else if eq $k "KnownGeometriesCMNamespace" }}
      deviceshare.{{ $k }}: {{ include "vshare.deviceConfig.namespace" $ | quote }}
      {{- else }}
      deviceshare.{{ $k }}: {{ $v | toJson }}
      {{- end }}
      {{- end }}
  {{- end }}
{{- end }}
{{- end }}
{{- end -}}

{{/* Where the allocation key Secret is mounted in the scheduler and the agents. */}}
{{- define "vshare.allocationKey.dir" -}}
/etc/vshare/allocation-key
{{- end -}}

{{/* The webhooks' namespaceSelector: every namespace but .skip and those
     labelled vshare.io/admission=disabled. */}}
{{- define "vshare.webhook.namespaceSelector" -}}
namespaceSelector:
  matchExpressions:
    - key: kubernetes.io/metadata.name
      operator: NotIn
      values: {{ toJson .skip }}
    - key: vshare.io/admission
      operator: NotIn
      values: ["disabled"]
{{- end -}}
