{{- define "vva.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "vva.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "vva.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "vva.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* Selector labels of one component (api, worker, migrations): pass (dict "ctx" $ "component" "api"). */}}
{{- define "vva.selectorLabels" -}}
app.kubernetes.io/name: {{ include "vva.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "vva.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "vva.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "vva.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "vva.modelsConfigMap" -}}
{{- if .Values.models.existingConfigMap -}}
{{- .Values.models.existingConfigMap -}}
{{- else if .Values.models.catalog -}}
{{- printf "%s-models" (include "vva.fullname" .) -}}
{{- end -}}
{{- end -}}

{{- define "vva.temporalTls" -}}
{{- if or .Values.temporal.tls .Values.temporal.apiKey.existingSecret .Values.temporal.mtls.existingSecret -}}true{{- end -}}
{{- end -}}

{{/* A secret reference in an env entry. */}}
{{- define "vva.secretEnv" -}}
- name: {{ .env }}
  valueFrom:
    secretKeyRef:
      name: {{ .secret }}
      key: {{ .key }}
{{- end -}}

{{/*
The environment of a long-running process: pass (dict "ctx" $ "process" "api") or "worker". Each gets
only the secrets it uses: the API ADMIN_TOKEN and URL_SIGNING_SECRET (it signs download URLs); a worker
URL_SIGNING_SECRET only with local storage (it signs the URLs in webhook events; S3 presigns them), never
ADMIN_TOKEN; secrets.extra entries go to the processes their `processes` names (both by default).
*/}}
{{- define "vva.env" -}}
{{- $process := .process -}}
{{- $ctx := .ctx -}}
{{- with .ctx -}}
{{- $secret := required "secrets.existingSecret is required: the Secret holding DATABASE_URL, ADMIN_TOKEN and URL_SIGNING_SECRET" .Values.secrets.existingSecret -}}
- name: NODE_ENV
  value: production
- name: HOST
  value: 0.0.0.0
- name: DATA_DIR
  value: /data
- name: PUBLIC_BASE_URL
  value: {{ required "publicBaseUrl is required (PUBLIC_BASE_URL: the base of the URLs handed to customers)" .Values.publicBaseUrl | quote }}
{{ include "vva.secretEnv" (dict "env" "DATABASE_URL" "secret" $secret "key" .Values.secrets.databaseUrlKey) }}
{{- if eq $process "api" }}
{{ include "vva.secretEnv" (dict "env" "ADMIN_TOKEN" "secret" $secret "key" .Values.secrets.adminTokenKey) }}
{{- end }}
{{- if or (eq $process "api") (eq .Values.storage.backend "local") }}
{{ include "vva.secretEnv" (dict "env" "URL_SIGNING_SECRET" "secret" $secret "key" .Values.secrets.urlSigningSecretKey) }}
{{- end }}
{{- if .Values.secrets.metricsTokenKey }}
{{ include "vva.secretEnv" (dict "env" "METRICS_TOKEN" "secret" $secret "key" .Values.secrets.metricsTokenKey) }}
{{- end }}
{{- range .Values.secrets.extra }}
{{- if has $process (default (list "api" "worker") .processes) }}
{{ include "vva.secretEnv" (dict "env" (required "secrets.extra[].env is required" .env) "secret" (default $secret .secret) "key" (required "secrets.extra[].key is required" .key)) }}
{{- end }}
{{- end }}
- name: TEMPORAL_ADDRESS
  value: {{ required "temporal.address is required (the Temporal frontend, host:port)" .Values.temporal.address | quote }}
- name: TEMPORAL_NAMESPACE
  value: {{ .Values.temporal.namespace | quote }}
- name: TEMPORAL_TASK_QUEUE
  value: {{ .Values.temporal.taskQueue | quote }}
{{- if include "vva.temporalTls" . }}
- name: TEMPORAL_TLS
  value: "true"
{{- end }}
{{- if .Values.temporal.serverName }}
- name: TEMPORAL_TLS_SERVER_NAME
  value: {{ .Values.temporal.serverName | quote }}
{{- end }}
{{- if .Values.temporal.apiKey.existingSecret }}
{{ include "vva.secretEnv" (dict "env" "TEMPORAL_API_KEY" "secret" .Values.temporal.apiKey.existingSecret "key" .Values.temporal.apiKey.key) }}
{{- end }}
{{- if .Values.temporal.mtls.existingSecret }}
- name: TEMPORAL_TLS_CLIENT_CERT_PATH
  value: /etc/temporal-tls/{{ .Values.temporal.mtls.certKey }}
- name: TEMPORAL_TLS_CLIENT_KEY_PATH
  value: /etc/temporal-tls/{{ .Values.temporal.mtls.keyKey }}
{{- if .Values.temporal.mtls.caKey }}
- name: TEMPORAL_TLS_SERVER_CA_CERT_PATH
  value: /etc/temporal-tls/{{ .Values.temporal.mtls.caKey }}
{{- end }}
{{- end }}
{{- if include "vva.modelsConfigMap" . }}
- name: MODELS_FILE
  value: /etc/video-voice-api/models.yaml
{{- end }}
{{- if eq .Values.storage.backend "s3" }}
- name: STORAGE_BACKEND
  value: s3
- name: S3_BUCKET
  value: {{ required "storage.s3.bucket is required with storage.backend s3" .Values.storage.s3.bucket | quote }}
- name: S3_REGION
  value: {{ .Values.storage.s3.region | quote }}
{{- with .Values.storage.s3.endpoint }}
- name: S3_ENDPOINT
  value: {{ . | quote }}
{{- end }}
{{- with .Values.storage.s3.publicEndpoint }}
- name: S3_PUBLIC_ENDPOINT
  value: {{ . | quote }}
{{- end }}
{{- if .Values.storage.s3.forcePathStyle }}
- name: S3_FORCE_PATH_STYLE
  value: "true"
{{- end }}
{{- else if eq .Values.storage.backend "local" }}
{{- $_ := required "storage.local.existingClaim is required with storage.backend local (a ReadWriteMany claim every pod shares)" .Values.storage.local.existingClaim }}
- name: STORAGE_BACKEND
  value: local
{{- else }}
{{- fail "storage.backend must be s3 or local" }}
{{- end }}
{{- with .Values.tracing.otlpEndpoint }}
- name: OTEL_EXPORTER_OTLP_ENDPOINT
  value: {{ . | quote }}
- name: OTEL_EXPORTER_OTLP_PROTOCOL
  value: {{ $ctx.Values.tracing.protocol | quote }}
- name: OTEL_TRACES_SAMPLER
  value: {{ $ctx.Values.tracing.sampler | quote }}
{{- with $ctx.Values.tracing.samplerArg }}
- name: OTEL_TRACES_SAMPLER_ARG
  value: {{ . | quote }}
{{- end }}
{{- with $ctx.Values.tracing.trustedCallers }}
- name: TRACING_TRUSTED_CALLERS
  value: {{ . | quote }}
{{- end }}
{{- end }}
{{- range $k, $v := .Values.env }}
- name: {{ $k }}
  value: {{ include "vva.envValue" $v }}
{{- end }}
{{- end }}
{{- end -}}

{{- define "vva.volumes" -}}
- name: tmp
  emptyDir: {}
- name: data
{{- if and (eq .Values.storage.backend "local") .Values.storage.local.existingClaim }}
  persistentVolumeClaim:
    claimName: {{ .Values.storage.local.existingClaim }}
{{- else }}
  emptyDir: {}
{{- end }}
{{- if include "vva.modelsConfigMap" . }}
- name: models
  configMap:
    name: {{ include "vva.modelsConfigMap" . }}
    items:
      - key: models.yaml
        path: models.yaml
{{- end }}
{{- if .Values.temporal.mtls.existingSecret }}
- name: temporal-tls
  secret:
    secretName: {{ .Values.temporal.mtls.existingSecret }}
    defaultMode: 0440
{{- end }}
{{- end -}}

{{- define "vva.volumeMounts" -}}
- name: tmp
  mountPath: /tmp
- name: data
  mountPath: /data
{{- if include "vva.modelsConfigMap" . }}
- name: models
  mountPath: /etc/video-voice-api
  readOnly: true
{{- end }}
{{- if .Values.temporal.mtls.existingSecret }}
- name: temporal-tls
  mountPath: /etc/temporal-tls
  readOnly: true
{{- end }}
{{- end -}}

{{/* Rolls the pods when the catalog the chart holds changes. */}}
{{- define "vva.podAnnotations" -}}
{{- if and .Values.models.catalog (not .Values.models.existingConfigMap) }}
checksum/models: {{ .Values.models.catalog | sha256sum }}
{{- end }}
{{- with .Values.podAnnotations }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* A plain variable's value as a quoted string; whole numbers stay whole (1800000, not 1.8e+06). */}}
{{- define "vva.envValue" -}}
{{- if and (kindIs "float64" .) (eq (. | floor) .) -}}
{{- . | int64 | toString | quote -}}
{{- else -}}
{{- . | toString | quote -}}
{{- end -}}
{{- end -}}
