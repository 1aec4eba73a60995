{{/*
What this chart cannot honour stops the render with the key's name, never silently: a key of
the holmes chart for something triage does not do, one it does not know, or a combination
triage would refuse at start-up.
*/}}

{{/* Top-level keys this chart reads (the holmes chart's meaning). */}}
{{- define "triage.honouredKeys" -}}
modelList toolsets mcp_servers mcpAddons customSkills customSkillPaths skillRepos k8sRBAC
additionalEnvVars additional_env_vars additional_env_froms extraEnvVarsSecrets certificate
logLevel enableJsonLogsFormat global tls auth replicas autoscaling strategy revisionHistoryLimit
imagePullPolicy imagePullSecrets podAnnotations commonLabels commonAnnotations affinity
nodeSelector tolerations priorityClassName podSecurityContext containerSecurityContext dnsConfig
initContainers additionalVolumes additionalVolumeMounts resources createServiceAccount
customServiceAccountName serviceAccount customClusterRoleRules crdPermissions openshift triage
operator args enablePostProcessing telegram
{{- end -}}

{{/*
Top-level keys of the holmes chart accepted without effect: HolmesGPT's own image, its
telemetry and Robusta-platform switches. NOTES.txt names those a values file sets.
*/}}
{{- define "triage.unusedKeys" -}}
image registry sentryDSN enableTelemetry enableAccountsCreate postProcessingPrompt releaseScopedSelectors
{{- end -}}

{{- define "triage.validate" -}}
{{- $honoured := regexSplit "\\s+" (include "triage.honouredKeys" . | trim) -1 -}}
{{- $unused := regexSplit "\\s+" (include "triage.unusedKeys" . | trim) -1 -}}
{{- range $key, $_ := .Values -}}
{{- if not (or (has $key $honoured) (has $key $unused)) -}}
{{- fail (printf "values key %q: not a key of the holmes chart this chart knows, nor one of triage's (README, \"Kubernetes\")" $key) -}}
{{- end -}}
{{- end -}}

{{- $triageKeys := list "image" "database" "persistence" "webhooks" "approvals" "settings" "terminationGracePeriodSeconds" -}}
{{- range $key, $_ := .Values.triage -}}
{{- if not (has $key $triageKeys) -}}
{{- fail (printf "values key \"triage.%s\": not one of triage's keys (%s)" $key (join ", " $triageKeys)) -}}
{{- end -}}
{{- end -}}

{{- if (.Values.operator | default dict).enabled -}}
{{- fail "operator.enabled: this chart does not deploy the Holmes operator; install it with the holmes chart (operator.enabled, holmesApiUrl: the URL of this release's Service) beside triage" -}}
{{- end -}}
{{- if (.Values.telegram | default dict).enabled -}}
{{- fail "telegram.enabled: this chart does not deploy HolmesGPT's Telegram bot" -}}
{{- end -}}
{{- if .Values.enablePostProcessing -}}
{{- fail "enablePostProcessing: triage has no post-processing of answers" -}}
{{- end -}}
{{- if .Values.args -}}
{{- fail "args: these are arguments of HolmesGPT's server.py; triage's container runs `triage serve` (set its options in triage.settings)" -}}
{{- end -}}
{{- if .Values.skillRepos -}}
{{- fail "skillRepos: triage does not fetch skills from git at run time; clone the repository in an init container or an image and list the directory in customSkillPaths" -}}
{{- end -}}
{{- range $name, $addon := .Values.mcpAddons -}}
{{- if and (kindIs "map" $addon) $addon.enabled -}}
{{- fail (printf "mcpAddons.%s.enabled: this chart deploys no MCP add-on servers; deploy the server yourself and list its URL under mcp_servers.%s" $name $name) -}}
{{- end -}}
{{- end -}}

{{- $auth := .Values.auth | default dict -}}
{{- if and (hasKey $auth "enabled") (not $auth.enabled) -}}
{{- fail "auth.enabled: false: triage does not serve a cluster address without an API key; leave auth unset and the chart generates one" -}}
{{- end -}}

{{- $tls := .Values.tls | default dict -}}
{{- if and $tls.enabled (not $tls.secretName) -}}
{{- fail "tls.enabled needs tls.secretName (a Secret with tls.crt and tls.key)" -}}
{{- end -}}

{{- if not (include "triage.usesPostgres" .) -}}
{{- if gt (int .Values.replicas) 1 -}}
{{- fail (printf "replicas: %v needs PostgreSQL: with SQLite (triage.database.existingSecret unset) each replica would keep its own conversations; set triage.database.existingSecret or replicas: 1" .Values.replicas) -}}
{{- end -}}
{{- if and .Values.autoscaling.enabled (gt (int .Values.autoscaling.maxReplicas) 1) -}}
{{- fail "autoscaling.enabled needs PostgreSQL: with SQLite each replica would keep its own conversations; set triage.database.existingSecret" -}}
{{- end -}}
{{- end -}}

{{- range $name, $skill := .Values.customSkills -}}
{{- if not (regexMatch "^[A-Za-z0-9][A-Za-z0-9_.-]*$" $name) -}}
{{- fail (printf "customSkills.%s: a skill's name is its directory: letters, digits, _, - and ." $name) -}}
{{- end -}}
{{- end -}}
{{- end -}}
