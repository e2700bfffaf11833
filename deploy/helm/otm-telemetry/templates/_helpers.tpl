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
{{- if .Values.redis.urlSecret.secretName }}
  valueFrom:
    secretKeyRef:
      name: {{ .Values.redis.urlSecret.secretName }}
      key: {{ .Values.redis.urlSecret.key }}
{{- else }}
  value: {{ .Values.redis.url | quote }}
{{- end }}
- name: CLICKHOUSE_URL
  value: {{ .Values.clickhouse.url | quote }}
- name: CLICKHOUSE_DATABASE
  value: {{ .Values.clickhouse.database | quote }}
- name: CLICKHOUSE_CLUSTER
  value: {{ .Values.clickhouse.cluster | default "" | quote }}
- name: MIGRATE_ON_START
  value: {{ .Values.clickhouse.migrateOnStart | quote }}
- name: KAFKA_SECURITY_PROTOCOL
  value: {{ .Values.kafka.securityProtocol | quote }}
- name: KAFKA_SASL_MECHANISM
  value: {{ .Values.kafka.saslMechanism | quote }}
{{- include "otm.secretPair" (dict "user" "KAFKA_SASL_USERNAME" "password" "KAFKA_SASL_PASSWORD" "from" .Values.kafka.credentials) }}
{{- with .Values.kafka.tls.secretName }}
- name: KAFKA_TLS_CA_FILE
  value: /etc/otm/kafka/ca.crt
{{- if $.Values.kafka.tls.clientCertificate }}
- name: KAFKA_TLS_CERT_FILE
  value: /etc/otm/kafka/tls.crt
- name: KAFKA_TLS_KEY_FILE
  value: /etc/otm/kafka/tls.key
{{- end }}
{{- end }}
{{- include "otm.secretPair" (dict "user" "SCHEMA_REGISTRY_USERNAME" "password" "SCHEMA_REGISTRY_PASSWORD" "from" .Values.schemaRegistry.credentials) }}
{{- if .Values.schemaRegistry.caSecretName }}
- name: SCHEMA_REGISTRY_CA_FILE
  value: /etc/otm/registry/ca.crt
{{- end }}
{{- if .Values.redis.caSecretName }}
- name: REDIS_TLS_CA_FILE
  value: /etc/otm/redis/ca.crt
{{- end }}
{{- if .Values.clickhouse.caSecretName }}
- name: CLICKHOUSE_CA_FILE
  value: /etc/otm/clickhouse/ca.crt
{{- end }}
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


{{/* A user and password from a Secret, when one is named: (dict "user" VAR "password" VAR "from" .Values.x.credentials). */}}
{{- define "otm.secretPair" -}}
{{- if .from.secretName }}
- name: {{ .user }}
  valueFrom:
    secretKeyRef:
      name: {{ .from.secretName }}
      key: {{ .from.usernameKey }}
- name: {{ .password }}
  valueFrom:
    secretKeyRef:
      name: {{ .from.secretName }}
      key: {{ .from.passwordKey }}
{{- end }}
{{- end -}}

{{/* ClickHouse's writing user (ingester, admin jobs). */}}
{{- define "otm.clickhouseEnv" -}}
{{- include "otm.secretPair" (dict "user" "CLICKHOUSE_USER" "password" "CLICKHOUSE_PASSWORD" "from" .Values.clickhouse.credentials) }}
{{- end -}}

{{/* The infrastructure's CA files (and Kafka's client certificate), each from its Secret, under /etc/otm. */}}
{{- define "otm.caMounts" -}}
{{- if .Values.kafka.tls.secretName }}
- { name: kafka-tls, mountPath: /etc/otm/kafka, readOnly: true }
{{- end }}
{{- if .Values.schemaRegistry.caSecretName }}
- { name: registry-ca, mountPath: /etc/otm/registry, readOnly: true }
{{- end }}
{{- if .Values.redis.caSecretName }}
- { name: redis-ca, mountPath: /etc/otm/redis, readOnly: true }
{{- end }}
{{- if .Values.clickhouse.caSecretName }}
- { name: clickhouse-ca, mountPath: /etc/otm/clickhouse, readOnly: true }
{{- end }}
{{- end -}}

{{- define "otm.caVolumes" -}}
{{- with .Values.kafka.tls.secretName }}
- name: kafka-tls
  secret: { secretName: {{ . }} }
{{- end }}
{{- with .Values.schemaRegistry.caSecretName }}
- name: registry-ca
  secret: { secretName: {{ . }} }
{{- end }}
{{- with .Values.redis.caSecretName }}
- name: redis-ca
  secret: { secretName: {{ . }} }
{{- end }}
{{- with .Values.clickhouse.caSecretName }}
- name: clickhouse-ca
  secret: { secretName: {{ . }} }
{{- end }}
{{- end -}}
