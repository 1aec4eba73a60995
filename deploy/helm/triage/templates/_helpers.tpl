{{/*
Names. The Service keeps the holmes chart's name, <release>-holmes, so the clients of a
HolmesGPT deployment (the operator, Headlamp, Robusta) reach triage at the address they already
use; the pods carry triage's labels only, so a holmes release in the same namespace never
selects them.
*/}}
{{- define "triage.serviceName" -}}
{{ .Release.Name }}-holmes
{{- end -}}

{{- define "triage.fullname" -}}
{{ .Release.Name }}-triage
{{- end -}}

{{- define "triage.apiKeySecretName" -}}
{{ .Values.auth.existingApiKeySecret | default (printf "%s-holmes-api-key" .Release.Name) }}
{{- end -}}

{{- define "triage.serviceAccountName" -}}
{{- if .Values.customServiceAccountName -}}
{{ .Values.customServiceAccountName }}
{{- else if .Values.createServiceAccount -}}
{{ .Release.Name }}-triage
{{- else -}}
default
{{- end -}}
{{- end -}}

{{- define "triage.selectorLabels" -}}
app.kubernetes.io/name: triage
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The labels of every object: selector labels, the chart's, and `commonLabels`. */}}
{{- define "triage.labels" -}}
{{ include "triage.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- range $key, $value := .Values.commonLabels }}
{{- if or (hasPrefix "app.kubernetes.io/" $key) (eq $key "helm.sh/chart") }}
{{- fail (printf "commonLabels.%s: the chart sets this label itself (its selectors use it)" $key) }}
{{- end }}
{{ $key }}: {{ $value | toString | quote }}
{{- end }}
{{- end -}}

{{/* `commonAnnotations` as a metadata block, or nothing. */}}
{{- define "triage.annotations" -}}
{{- with .Values.commonAnnotations }}
annotations:
  {{- range $key, $value := . }}
  {{ $key }}: {{ $value | toString | quote }}
  {{- end }}
{{- end }}
{{- end -}}

{{- define "triage.image" -}}
{{- $image := .Values.triage.image -}}
{{- if $image.digest -}}
{{ $image.repository }}@{{ $image.digest }}
{{- else -}}
{{ $image.repository }}:{{ $image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end -}}

{{- define "triage.usesPostgres" -}}
{{- if .Values.triage.database.existingSecret }}true{{ end -}}
{{- end -}}

{{/*
`envRef:VAR` (a string, spaces after the colon allowed) or `{envRef: VAR}` (a map of that one
key) becomes "{{ env.VAR }}", which triage expands from its environment when it reads the model
list, so a key is named in the values and its value exists only in the pod. Maps are walked
recursively; the result is JSON (include returns strings).
*/}}
{{- define "triage.envRefs" -}}
{{- $out := dict -}}
{{- range $key, $value := .value -}}
{{- $path := printf "%s.%s" $.path $key -}}
{{- $ref := "" -}}
{{- if and (kindIs "string" $value) (hasPrefix "envRef:" $value) -}}
{{- $ref = trimPrefix "envRef:" $value | trim -}}
{{- else if and (kindIs "map" $value) (hasKey $value "envRef") -}}
{{- if ne (len $value) 1 -}}
{{- fail (printf "%s: a map with envRef takes no other keys" $path) -}}
{{- end -}}
{{- $ref = toString $value.envRef -}}
{{- end -}}
{{- if $ref -}}
{{- if not (regexMatch "^[A-Za-z_][A-Za-z0-9_]*$" $ref) -}}
{{- fail (printf "%s: envRef %q is not an environment variable name ([A-Za-z_][A-Za-z0-9_]*); Kubernetes drops such keys from a Secret loaded with envFrom" $path $ref) -}}
{{- end -}}
{{- $_ := set $out $key (printf "{{ env.%s }}" $ref) -}}
{{- else if kindIs "map" $value -}}
{{- $_ := set $out $key (include "triage.envRefs" (dict "value" $value "path" $path) | fromJson) -}}
{{- else -}}
{{- $_ := set $out $key $value -}}
{{- end -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}

{{/* The model list file's content. */}}
{{- define "triage.modelList" -}}
{{- include "triage.envRefs" (dict "value" (.Values.modelList | default dict) "path" "modelList") | fromJson | toYaml -}}
{{- end -}}

{{/* The toolset file's content: `toolsets` (with k8sRBAC's overrides) and `mcp_servers`. */}}
{{- define "triage.toolsetFile" -}}
{{- $toolsets := deepCopy (.Values.toolsets | default dict) -}}
{{- if .Values.k8sRBAC -}}
{{- range $name := list "kubernetes/core" "kubernetes/logs" "bash" -}}
{{- $_ := set $toolsets $name (mergeOverwrite (deepCopy (get $toolsets $name | default dict)) (dict "enabled" false)) -}}
{{- end -}}
{{- end -}}
{{- toYaml (dict "toolsets" $toolsets "mcp_servers" (.Values.mcp_servers | default dict)) -}}
{{- end -}}

{{/*
Directories of SKILL.md files: triage.settings' skills.paths (the env set from this list
replaces that key), customSkillPaths, then the mounted customSkills.
*/}}
{{- define "triage.skillPaths" -}}
{{- $paths := concat (dig "skills" "paths" list (.Values.triage.settings | default dict)) (.Values.customSkillPaths | default list) -}}
{{- if .Values.customSkills -}}
{{- $paths = append $paths "/etc/holmes/skills" -}}
{{- end -}}
{{- join "," $paths -}}
{{- end -}}

{{/*
A skill's SKILL.md. HolmesGPT names a skill after its directory when the frontmatter has no
`name`; triage needs the name in the frontmatter, so the chart writes it there.
*/}}
{{- define "triage.skillFile" -}}
{{- $content := .skill.content | default "" -}}
{{- if not (hasPrefix "---" $content) -}}
{{- fail (printf "customSkills.%s.content: a SKILL.md starts with a --- frontmatter holding its description" .name) -}}
{{- end -}}
{{- $front := index (splitList "\n---" (trimPrefix "---" $content)) 0 -}}
{{- if regexMatch "(?m)^name:" $front -}}
{{ $content }}
{{- else -}}
---
name: {{ .name }}
{{ trimPrefix "---" $content | trimPrefix "\n" }}
{{- end -}}
{{- end -}}

{{/* triage's own config file (TRIAGE_CONFIG): `triage.settings` and `triage.webhooks`. */}}
{{- define "triage.configFile" -}}
{{- $settings := deepCopy (.Values.triage.settings | default dict) -}}
{{- with .Values.triage.webhooks -}}
{{- if hasKey $settings "webhooks" -}}
{{- fail "triage.webhooks and triage.settings.webhooks: list the receivers in one of them" -}}
{{- end -}}
{{- $_ := set $settings "webhooks" (deepCopy .) -}}
{{- end -}}
{{- include "triage.wholeNumbers" $settings -}}
{{- toToml $settings -}}
{{- end -}}

{{/*
Values reach templates as JSON numbers (float64), which toToml writes as 12.0, and triage's
integer keys refuse a float: whole numbers become integers again, in place (a map is a
reference; a list is rebuilt and set back into its map).
*/}}
{{- define "triage.wholeNumbers" -}}
{{- $map := . -}}
{{- range $key, $value := $map -}}
{{- if and (kindIs "float64" $value) (eq $value (float64 (int64 $value))) -}}
{{- $_ := set $map $key (int64 $value) -}}
{{- else if kindIs "map" $value -}}
{{- include "triage.wholeNumbers" $value -}}
{{- else if kindIs "slice" $value -}}
{{- $items := list -}}
{{- range $item := $value -}}
{{- if and (kindIs "float64" $item) (eq $item (float64 (int64 $item))) -}}
{{- $items = append $items (int64 $item) -}}
{{- else -}}
{{- if kindIs "map" $item -}}{{- include "triage.wholeNumbers" $item -}}{{- end -}}
{{- $items = append $items $item -}}
{{- end -}}
{{- end -}}
{{- $_ := set $map $key $items -}}
{{- end -}}
{{- end -}}
{{- end -}}
