{{- define "otm.fullname" -}}
{{- printf "%s" .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}

{{- define "otm.labels" -}}
app.kubernetes.io/name: otm-telemetry
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "otm.selector" -}}
app.kubernetes.io/name: otm-telemetry
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* The environment every service reads: the infrastructure's addresses and the topics. */}}
{{- define "otm.env" -}}
- name: KAFKA_BROKERS
  value: {{ .Values.kafka.brokers | quote }}
- name: USAGE_TOPIC
  value: {{ .Values.kafka.topic | quote }}
- name: DLQ_TOPIC
  value: {{ .Values.kafka.deadLetterTopic | quote }}
- name: USAGE_TOPIC_PARTITIONS
  value: {{ .Values.kafka.partitions | quote }}
- name: SCHEMA_REGISTRY_URL
  value: {{ .Values.schemaRegistry.url | quote }}
- name: REDIS_URL
  value: {{ .Values.redis.url | quote }}
- name: CLICKHOUSE_URL
  value: {{ .Values.clickhouse.url | quote }}
- name: CLICKHOUSE_DATABASE
  value: {{ .Values.clickhouse.database | quote }}
- name: CLICKHOUSE_CLUSTER
  value: {{ .Values.clickhouse.cluster | default "" | quote }}
- name: METRICS_HOST
  value: "0.0.0.0"
{{- if .Values.metrics.token.secretName }}
- name: METRICS_TOKEN
  valueFrom:
    secretKeyRef:
      name: {{ .Values.metrics.token.secretName }}
      key: {{ .Values.metrics.token.key }}
{{- end }}
{{- range $name, $value := .Values.env }}
- name: {{ $name }}
  value: {{ $value | quote }}
{{- end }}
{{- end -}}

{{- define "otm.podSecurity" -}}
securityContext:
  runAsNonRoot: true
  runAsUser: 1000
  runAsGroup: 1000
  fsGroup: 1000
{{- end -}}

{{- define "otm.containerSecurity" -}}
securityContext:
  allowPrivilegeEscalation: false
  readOnlyRootFilesystem: true
  capabilities:
    drop: ["ALL"]
{{- end -}}
