{{/*
The chart name, truncated to the 63 characters a label value allows.
*/}}
{{- define "flotilla-agent.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The name of every object of the release: fullnameOverride, else the release
name if it already contains the chart name, else "<release>-<chart>".
*/}}
{{- define "flotilla-agent.fullname" -}}
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
{{- define "flotilla-agent.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Labels on every object.
*/}}
{{- define "flotilla-agent.labels" -}}
helm.sh/chart: {{ include "flotilla-agent.chart" . }}
{{ include "flotilla-agent.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/component: agent
app.kubernetes.io/part-of: flotilla
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/*
Labels that select the agent's pod; they must never change between upgrades.
*/}}
{{- define "flotilla-agent.selectorLabels" -}}
app.kubernetes.io/name: {{ include "flotilla-agent.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/*
The ServiceAccount the agent runs as.
*/}}
{{- define "flotilla-agent.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "flotilla-agent.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
The data of the chart's own Secret: every credential given as a value.
Empty when all credentials come from existing Secrets.
*/}}
{{- define "flotilla-agent.secretData" -}}
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
{{- if not .Values.registration.existingSecret.name }}
{{- with .Values.registration.token }}
registration-token: {{ . | b64enc | quote }}
{{- end }}
{{- end }}
{{- end }}

{{/*
The data of the chart's payload keys Secret: one key file per entry of
payloadKeys, whose content is the key in base64 as --payload-keys reads it.
Empty when payloadKeysExistingSecret is set or payloadKeys is empty.
*/}}
{{- define "flotilla-agent.payloadKeysData" -}}
{{- if not .Values.payloadKeysExistingSecret }}
{{- /* range over a map visits the keys in sorted order */}}
{{- range $id, $key := .Values.payloadKeys }}
{{ $id }}: {{ $key | b64enc | quote }}
{{- end }}
{{- end }}
{{- end }}

{{/*
The name of the Secret mounted as the payload keyring: the existing one, else
the chart's own when it has keys. Empty without payload keys.
*/}}
{{- define "flotilla-agent.payloadKeysSecret" -}}
{{- if .Values.payloadKeysExistingSecret }}
{{- .Values.payloadKeysExistingSecret }}
{{- else if .Values.payloadKeys }}
{{- printf "%s-payload-keys" (include "flotilla-agent.fullname" .) }}
{{- end }}
{{- end }}

{{/*
The keys of the Secret holding the Temporal TLS files, as a JSON list:
existingSecretKeys for an existing Secret, else the PEM values that are set.
*/}}
{{- define "flotilla-agent.tlsKeys" -}}
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
{{- define "flotilla-agent.registryKeys" -}}
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
{{- define "flotilla-agent.secretKeyRef" -}}
{{- $root := index . 0 }}
{{- $value := index . 1 }}
{{- $existing := index . 2 }}
{{- $defaultKey := index . 3 }}
{{- if $existing.name }}
{{- dict "name" $existing.name "key" ($existing.key | default $defaultKey) | toJson }}
{{- else if $value }}
{{- dict "name" (include "flotilla-agent.fullname" $root) "key" $defaultKey | toJson }}
{{- else }}
{{- dict | toJson }}
{{- end }}
{{- end }}

{{/*
The agent container's environment: credentials from Secrets, then .Values.env.
*/}}
{{- define "flotilla-agent.env" -}}
{{- $registryKeys := include "flotilla-agent.registryKeys" . | fromJsonArray }}
{{- $registrySecret := .Values.contentRegistry.existingSecret | default (include "flotilla-agent.fullname" .) }}
{{- with include "flotilla-agent.secretKeyRef" (list . .Values.temporal.apiKey .Values.temporal.apiKeyExistingSecret "api-key") | fromJson }}
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
{{- with include "flotilla-agent.secretKeyRef" (list . .Values.registration.token .Values.registration.existingSecret "registration-token") | fromJson }}
- name: FLOTILLA_REGISTRATION_TOKEN
  valueFrom:
    secretKeyRef:
      {{- toYaml . | nindent 6 }}
{{- end }}
{{- with .Values.env }}
{{ toYaml . }}
{{- end }}
{{- end }}
