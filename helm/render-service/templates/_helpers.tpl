{{/* Names and labels. */}}
{{- define "render-service.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "render-service.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "render-service.selectorLabels" -}}
app.kubernetes.io/name: {{ include "render-service.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "render-service.labels" -}}
{{ include "render-service.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* Secret holding the API key and stream-state keys created by this chart. */}}
{{- define "render-service.secretName" -}}
{{- printf "%s-keys" (include "render-service.fullname" .) -}}
{{- end -}}

{{- define "render-service.apiKeySecret" -}}
{{- default (include "render-service.secretName" .) .Values.apiKey.existingSecret -}}
{{- end -}}

{{- define "render-service.streamStateSecret" -}}
{{- default (include "render-service.secretName" .) .Values.streamState.existingSecret -}}
{{- end -}}

{{- define "render-service.apiKeyEnabled" -}}
{{- if or .Values.apiKey.value .Values.apiKey.existingSecret -}}true{{- end -}}
{{- end -}}

{{/* stream-state keys: the values', else the ones already in the cluster, else a new random one. */}}
{{- define "render-service.streamStateKeys" -}}
{{- if .Values.streamState.keys -}}
{{- join "\n" .Values.streamState.keys -}}
{{- else -}}
{{- $existing := lookup "v1" "Secret" .Release.Namespace (include "render-service.secretName" .) -}}
{{- if and $existing (index ($existing.data | default dict) .Values.streamState.secretKey) -}}
{{- index $existing.data .Values.streamState.secretKey | b64dec -}}
{{- else -}}
{{- randAlphaNum 48 -}}
{{- end -}}
{{- end -}}
{{- end -}}
