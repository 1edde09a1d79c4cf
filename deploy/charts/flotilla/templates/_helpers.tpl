{{/*
The chart name, truncated to the 63 characters a label value allows.
*/}}
{{- define "flotilla.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The name of every object of the release: fullnameOverride, else the release
name if it already contains the chart name, else "<release>-<chart>".
*/}}
{{- define "flotilla.fullname" -}}
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

{{/*
The value of the helm.sh/chart label.
*/}}
{{- define "flotilla.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Labels on every object.
*/}}
{{- define "flotilla.labels" -}}
helm.sh/chart: {{ include "flotilla.chart" . }}
{{ include "flotilla.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/component: controller
app.kubernetes.io/part-of: flotilla
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/*
Labels that select the controller's pod; they must never change between upgrades.
*/}}
{{- define "flotilla.selectorLabels" -}}
app.kubernetes.io/name: {{ include "flotilla.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/*
The ServiceAccount the controller runs as.
*/}}
{{- define "flotilla.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "flotilla.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
The data of the chart's own Secret: every credential given as a value.
Empty when all credentials come from existing Secrets.
*/}}
{{- define "flotilla.secretData" -}}
{{- with .Values.temporal.tls }}
{{- if not .existingSecret }}
{{- with .ca }}
ca.crt: {{ . | b64enc | quote }}
{{- end }}
{{- with .cert }}
tls.crt: {{ . | b64enc | quote }}
{{- end }}
{{- with .key }}
tls.key: {{ . | b64enc | quote }}
{{- end }}
{{- end }}
{{- end }}
{{- if not .Values.temporal.apiKeyExistingSecret.name }}
{{- with .Values.temporal.apiKey }}
api-key: {{ . | b64enc | quote }}
{{- end }}
{{- end }}
{{- with .Values.contentRegistry }}
{{- if not .existingSecret }}
{{- with .ca }}
registry-ca.crt: {{ . | b64enc | quote }}
{{- end }}
{{- with .username }}
registry-username: {{ . | b64enc | quote }}
{{- end }}
{{- with .password }}
registry-password: {{ . | b64enc | quote }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{/*
The keys of the Secret holding the Temporal TLS files, as a JSON list:
existingSecretKeys for an existing Secret, else the PEM values that are set.
*/}}
{{- define "flotilla.tlsKeys" -}}
{{- $tls := .Values.temporal.tls }}
{{- if $tls.existingSecret }}
{{- $tls.existingSecretKeys | toJson }}
{{- else }}
{{- $keys := list }}
{{- if $tls.ca }}{{ $keys = append $keys "ca.crt" }}{{ end }}
{{- if $tls.cert }}{{ $keys = append $keys "tls.crt" }}{{ end }}
{{- if $tls.key }}{{ $keys = append $keys "tls.key" }}{{ end }}
{{- $keys | toJson }}
{{- end }}
{{- end }}

{{/*
The keys of the Secret holding the content registry credentials, as a JSON
list: existingSecretKeys for an existing Secret, else the values that are set.
*/}}
{{- define "flotilla.registryKeys" -}}
{{- $reg := .Values.contentRegistry }}
{{- if $reg.existingSecret }}
{{- $reg.existingSecretKeys | toJson }}
{{- else }}
{{- $keys := list }}
{{- if $reg.ca }}{{ $keys = append $keys "registry-ca.crt" }}{{ end }}
{{- if $reg.username }}{{ $keys = append $keys "registry-username" }}{{ end }}
{{- if $reg.password }}{{ $keys = append $keys "registry-password" }}{{ end }}
{{- $keys | toJson }}
{{- end }}
{{- end }}

{{/*
A secretKeyRef, as a dict, for a credential that is either a value in the
chart's Secret (under defaultKey) or a key of an existing Secret.
Arguments: a list of the root context, the value, the existing Secret
({name, key}) and defaultKey. Empty when neither is set.
*/}}
{{- define "flotilla.secretKeyRef" -}}
{{- $root := index . 0 }}
{{- $value := index . 1 }}
{{- $existing := index . 2 }}
{{- $defaultKey := index . 3 }}
{{- if $existing.name }}
{{- dict "name" $existing.name "key" ($existing.key | default $defaultKey) | toJson }}
{{- else if $value }}
{{- dict "name" (include "flotilla.fullname" $root) "key" $defaultKey | toJson }}
{{- else }}
{{- dict | toJson }}
{{- end }}
{{- end }}

{{/*
The controller container's environment: credentials from Secrets, then .Values.env.
*/}}
{{- define "flotilla.env" -}}
{{- $registryKeys := include "flotilla.registryKeys" . | fromJsonArray }}
{{- $registrySecret := .Values.contentRegistry.existingSecret | default (include "flotilla.fullname" .) }}
{{- with include "flotilla.secretKeyRef" (list . .Values.temporal.apiKey .Values.temporal.apiKeyExistingSecret "api-key") | fromJson }}
- name: FLOTILLA_API_KEY
  valueFrom:
    secretKeyRef:
      {{- toYaml . | nindent 6 }}
{{- end }}
{{- if has "registry-username" $registryKeys }}
- name: FLOTILLA_CONTENT_REGISTRY_USERNAME
  valueFrom:
    secretKeyRef:
      name: {{ $registrySecret }}
      key: registry-username
{{- end }}
{{- if has "registry-password" $registryKeys }}
- name: FLOTILLA_CONTENT_REGISTRY_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ $registrySecret }}
      key: registry-password
{{- end }}
{{- with .Values.env }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
agent-defaults.yaml: the defaults the controller applies to the agents it
installs, built from .Values.agent with exactly the keys the controller reads.
*/}}
{{- define "flotilla.agentDefaults" -}}
{{- $agent := .Values.agent }}
{{- $defaults := dict
  "image" (printf "%s:%s" $agent.image.repository ($agent.image.tag | default .Chart.AppVersion))
  "imagePullPolicy" $agent.image.pullPolicy
  "namespace" $agent.namespace
  "temporal" (dict
    "address" $agent.temporal.address
    "namespace" $agent.temporal.namespace
    "serverName" $agent.temporal.serverName
    "caFile" $agent.temporal.caFile
    "apiKeyFile" $agent.temporal.apiKeyFile
    "certFile" $agent.temporal.certFile
    "keyFile" $agent.temporal.keyFile
    "tlsSecret" $agent.temporal.tlsSecret
    "tlsSecretKeys" ($agent.temporal.tlsSecretKeys | default list))
  "contentRegistry" (dict
    "url" $agent.contentRegistry.url
    "plainHTTP" $agent.contentRegistry.plainHTTP
    "caFile" $agent.contentRegistry.caFile)
  "heartbeatInterval" $agent.heartbeatInterval
  "tolerations" ($agent.tolerations | default list)
  "affinity" ($agent.affinity | default dict)
  "nodeSelector" ($agent.nodeSelector | default dict)
  "resources" ($agent.resources | default dict)
  "env" ($agent.env | default list)
  "priorityClassName" $agent.priorityClassName
}}
{{- toYaml $defaults }}
{{- end }}

{{/*
webhook.maxBodyBytes as a decimal integer: a values file holds numbers as
floats, which would print as 1.048576e+07. Fails unless it is a whole
number above 0.
*/}}
{{- define "flotilla.webhookMaxBody" -}}
{{- $v := .Values.webhook.maxBodyBytes }}
{{- $n := int64 $v }}
{{- if or (lt $n 1) (ne (float64 $v) (float64 $n)) }}
{{- fail (printf "webhook.maxBodyBytes must be a whole number of bytes above 0, not %v" $v) }}
{{- end }}
{{- $n }}
{{- end }}

{{/*
The name of the Secret holding the controllers' seal keys: sealKeys.existingSecret,
else the one the chart generates.
*/}}
{{- define "flotilla.sealKeysSecret" -}}
{{- .Values.sealKeys.existingSecret | default (printf "%s-seal-keys" (include "flotilla.fullname" .)) }}
{{- end }}

{{/*
Whether the state dir is a claim only one node can mount ("true" or ""):
persistence without ReadWriteMany. Such a claim needs one replica and the
Recreate strategy.
*/}}
{{- define "flotilla.stateClaimSingleNode" -}}
{{- if and .Values.persistence.enabled (not (has "ReadWriteMany" .Values.persistence.accessModes)) }}true{{ end }}
{{- end }}

{{/*
replicaCount as an integer: a values file holds numbers as floats.
Fails unless it is a whole number of at least 0.
*/}}
{{- define "flotilla.replicas" -}}
{{- $v := .Values.replicaCount }}
{{- $n := int64 $v }}
{{- if or (lt $n 0) (ne (float64 $v) (float64 $n)) }}
{{- fail (printf "replicaCount must be a whole number of at least 0, not %v" $v) }}
{{- end }}
{{- if and (gt $n 1) (include "flotilla.stateClaimSingleNode" .) }}
{{- fail (printf "persistence.enabled with replicaCount %d needs a ReadWriteMany claim: a ReadWriteOnce volume mounts on one node only. The state dir is only a cache, so leave persistence.enabled false (an emptyDir per pod), set persistence.accessModes to [ReadWriteMany] (with existingClaim: a claim that allows it), or set replicaCount to 1" $n) }}
{{- end }}
{{- $n }}
{{- end }}

{{/*
The Deployment's strategy: updateStrategy, else Recreate for a single-node
claim, else a RollingUpdate that never has fewer ready pods than replicas.
*/}}
{{- define "flotilla.updateStrategy" -}}
{{- if .Values.updateStrategy }}
{{- toYaml .Values.updateStrategy }}
{{- else if include "flotilla.stateClaimSingleNode" . }}
type: Recreate
{{- else }}
type: RollingUpdate
rollingUpdate:
  maxSurge: 1
  maxUnavailable: 0
{{- end }}
{{- end }}

{{/*
The pods' affinity: .Values.affinity, its podAntiAffinity defaulting to a
preference for nodes that run no other controller of the release.
*/}}
{{- define "flotilla.affinity" -}}
{{- $affinity := deepCopy (.Values.affinity | default dict) }}
{{- if not (hasKey $affinity "podAntiAffinity") }}
{{- $term := dict
  "topologyKey" "kubernetes.io/hostname"
  "labelSelector" (dict "matchLabels" (include "flotilla.selectorLabels" . | fromYaml)) }}
{{- $_ := set $affinity "podAntiAffinity" (dict
  "preferredDuringSchedulingIgnoredDuringExecution" (list (dict "weight" 100 "podAffinityTerm" $term))) }}
{{- end }}
{{- with $affinity }}
{{- toYaml . }}
{{- end }}
{{- end }}

{{/*
The pods' topologySpreadConstraints: a constraint without labelSelector
selects the release's controller pods.
*/}}
{{- define "flotilla.topologySpreadConstraints" -}}
{{- $out := list }}
{{- range .Values.topologySpreadConstraints }}
{{- $c := deepCopy . }}
{{- if not (hasKey $c "labelSelector") }}
{{- $_ := set $c "labelSelector" (dict "matchLabels" (include "flotilla.selectorLabels" $ | fromYaml)) }}
{{- end }}
{{- $out = append $out $c }}
{{- end }}
{{- with $out }}
{{- toYaml . }}
{{- end }}
{{- end }}

{{/*
A PodDisruptionBudget bound: an integer, or a percentage string as given.
*/}}
{{- define "flotilla.intOrPercent" -}}
{{- if kindIs "string" . }}{{ . | quote }}{{ else }}{{ int64 . }}{{ end }}
{{- end }}

{{/*
The Fleet resources the management controller watches, as a JSON list,
each with the suffix given in the dict's "suffix" (a subresource such as
"/status"), if any.
*/}}
{{- define "flotilla.fleetResources" -}}
{{- $suffix := .suffix | default "" }}
{{- $out := list }}
{{- range list "gitrepos" "helmops" "clusters" "clustergroups" "clusterregistrationtokens" "gitreporestrictions" "policies" }}
{{- $out = append $out (printf "%s%s" . $suffix) }}
{{- end }}
{{- toJson $out }}
{{- end }}
