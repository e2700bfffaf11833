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
- name: REDIS_CLUSTER
  value: {{ .Values.redis.cluster | default false | quote }}
- name: REDIS_SENTINEL_MASTER
  value: {{ .Values.redis.sentinelMaster | default "" | quote }}
- name: CLICKHOUSE_URL
  value: {{ .Values.clickhouse.url | quote }}
- name: CLICKHOUSE_DATABASE
  value: {{ .Values.clickhouse.database | quote }}
- name: CLICKHOUSE_CLUSTER
  value: {{ .Values.clickhouse.cluster | default "" | quote }}
- name: MIGRATE_ON_START
  value: {{ .Values.clickhouse.migrateOnStart | quote }}
- name: SCHEMA_REGISTRY_REGISTER
  value: {{ .Values.schemaRegistry.registerOnStart | quote }}
- name: KAFKA_SECURITY_PROTOCOL
  value: {{ .Values.kafka.securityProtocol | quote }}
- name: KAFKA_SASL_MECHANISM
  value: {{ .Values.kafka.saslMechanism | quote }}
{{- with .Values.kafka.awsRegion }}
- name: KAFKA_AWS_REGION
  value: {{ . | quote }}
{{- end }}
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

{{/* The ServiceAccount the services run as: created (the release's name by default) or named; empty: the default. */}}
{{- define "otm.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- .Values.serviceAccount.name | default (include "otm.fullname" .) -}}
{{- else -}}
{{- .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* A pod's metadata: the chart's labels, the chart-wide and the component's labels and annotations. (dict "root" . "component" .Values.gateway "name" "gateway") */}}
{{- define "otm.podMetadata" -}}
labels:
  {{- include "otm.labels" .root | nindent 2 }}
  app.kubernetes.io/component: {{ .name }}
  {{- with .root.Values.podLabels }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- with merge (dict) (.component.podAnnotations | default dict) .root.Values.podAnnotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* A pod's scheduling, identity and pull secrets: the component's value, else the chart-wide one. (dict "root" . "component" .Values.gateway) */}}
{{- define "otm.podPlacement" -}}
{{- $values := .root.Values -}}
{{- with include "otm.serviceAccountName" .root }}
serviceAccountName: {{ . }}
{{- end }}
{{- with $values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .component.nodeSelector | default $values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .component.tolerations | default $values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .component.affinity | default $values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $values.topologySpreadConstraints }}
topologySpreadConstraints:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- end -}}

{{/* An Ingress to a component's Service, when its values enable one. (dict "root" . "ingress" .Values.gateway.ingress "name" "gateway" "port" "https") */}}
{{- define "otm.ingress" -}}
{{- if .ingress.enabled }}
{{- $service := printf "%s-%s" (include "otm.fullname" .root) .name }}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: {{ $service }}
  labels:
    {{- include "otm.labels" .root | nindent 4 }}
    app.kubernetes.io/component: {{ .name }}
  {{- with .ingress.annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
spec:
  {{- with .ingress.className }}
  ingressClassName: {{ . }}
  {{- end }}
  {{- with .ingress.tls }}
  tls:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  rules:
    {{- range .ingress.hosts }}
    - host: {{ .host | quote }}
      http:
        paths:
          {{- range (.paths | default (list (dict "path" "/" "pathType" "Prefix"))) }}
          - path: {{ .path }}
            pathType: {{ .pathType | default "Prefix" }}
            backend:
              service:
                name: {{ $service }}
                port:
                  name: {{ $.port }}
          {{- end }}
    {{- end }}
{{- end }}
{{- end -}}

{{/* The Kafka user and password of one service: its own (component.kafkaCredentials) when set, else kafka.credentials. */}}
{{- define "otm.kafkaCredentials" -}}
{{- $from := .root.Values.kafka.credentials -}}
{{- with .component.kafkaCredentials }}{{ if .secretName }}{{ $from = . }}{{ end }}{{ end -}}
{{- include "otm.secretPair" (dict "user" "KAFKA_SASL_USERNAME" "password" "KAFKA_SASL_PASSWORD" "from" $from) }}
{{- end -}}

{{/*
A container's env list with each name once: a name given again (a component's `env`,
`extraEnv`) replaces the chart's own entry, the last one kept. Kubernetes runs the last
of a repeated name, but server-side apply refuses the list and a three-way merge
patch can drop the entry. The list as written when no name repeats.
*/}}
{{- define "otm.uniqueEnv" -}}
{{- $text := . -}}
{{- $entries := fromYamlArray $text -}}
{{- $last := dict -}}
{{- range $index, $entry := $entries -}}
{{- $_ := set $last $entry.name $index -}}
{{- end -}}
{{- if eq (len $last) (len $entries) -}}
{{- $text -}}
{{- else -}}
{{- $kept := list -}}
{{- range $index, $entry := $entries -}}
{{- if eq (get $last $entry.name) $index -}}
{{- $kept = append $kept $entry -}}
{{- end -}}
{{- end -}}
{{- toYaml $kept -}}
{{- end -}}
{{- end -}}
