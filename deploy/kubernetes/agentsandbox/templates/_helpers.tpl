{{/* The release's base name: every object is named from it. */}}
{{- define "agentsandbox.fullname" -}}
{{- if contains "agentsandbox" .Release.Name -}}
{{- .Release.Name | trunc 45 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-agentsandbox" .Release.Name | trunc 45 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* Labels every object carries; "component" is worker or live. */}}
{{- define "agentsandbox.labels" -}}
app.kubernetes.io/name: agentsandbox
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version }}
{{- end -}}

{{/* The labels a component's pods are selected by. */}}
{{- define "agentsandbox.selector" -}}
app.kubernetes.io/name: agentsandbox
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* An image reference: repository:tag, the tag defaulting to appVersion. */}}
{{- define "agentsandbox.image" -}}
{{- printf "%s:%s" .image.repository (default .root.Chart.AppVersion .image.tag) -}}
{{- end -}}
