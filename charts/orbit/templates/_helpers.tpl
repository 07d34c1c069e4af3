{{/* Names, labels and the pieces every workload shares. */}}

{{- define "orbit.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "orbit.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains (include "orbit.name" .) .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name (include "orbit.name" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* Labels of every object; call with (dict "root" $ "component" "server"). */}}
{{- define "orbit.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version | replace "+" "_" }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/part-of: orbit
{{ include "orbit.selectorLabels" . }}
{{- end -}}

{{- define "orbit.selectorLabels" -}}
app.kubernetes.io/name: {{ include "orbit.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
{{- if .component }}
app.kubernetes.io/component: {{ .component }}
{{- end }}
{{- end -}}

{{- define "orbit.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "orbit.serverServiceAccount" -}}
{{- if .Values.serviceAccount.server.create -}}
{{- default (printf "%s-server" (include "orbit.fullname" .)) .Values.serviceAccount.server.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.server.name -}}
{{- end -}}
{{- end -}}

{{- define "orbit.operatorServiceAccount" -}}
{{- if .Values.serviceAccount.operator.create -}}
{{- default (printf "%s-operator" (include "orbit.fullname" .)) .Values.serviceAccount.operator.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.operator.name -}}
{{- end -}}
{{- end -}}

{{/* The server URL worker pods are given. */}}
{{- define "orbit.serverUrl" -}}
{{- default (printf "http://%s.%s.svc:%d" (include "orbit.fullname" .) .Release.Namespace (int .Values.server.service.port)) .Values.operator.serverUrl -}}
{{- end -}}

{{/* ORBIT_DATABASE_URL from an existing Secret; call with (dict "secret" NAME "key" KEY). */}}
{{- define "orbit.databaseEnv" -}}
- name: ORBIT_DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ .secret }}
      key: {{ .key }}
{{- end -}}

{{/* A writable /tmp on the read-only root filesystem. */}}
{{- define "orbit.tmpVolume" -}}
- name: tmp
  emptyDir:
    sizeLimit: 64Mi
{{- end -}}

{{- define "orbit.tmpMount" -}}
- name: tmp
  mountPath: /tmp
{{- end -}}

{{/* Refuse value combinations that would install something unsafe or unusable. */}}
{{- define "orbit.validate" -}}
{{- if and (not .Values.database.migrationSecret) (not .Values.database.singleUser) -}}
{{- fail "database.migrationSecret is empty: the server would run as the migration's user, which can UPDATE and DELETE audit rows. Create a Secret with a DDL-capable user's URL and set database.migrationSecret (the hook then creates the server's own user), or accept one user with database.singleUser=true (docs/operations/install.md#database-users)" -}}
{{- end -}}
{{- if and .Values.database.migrationSecret .Values.database.singleUser -}}
{{- fail "database.singleUser=true runs everything as existingSecret's user: set database.migrationSecret=\"\" as well" -}}
{{- end -}}
{{- if and .Values.networkPolicy.enabled .Values.networkPolicy.egress.enabled (not .Values.networkPolicy.egress.databaseTo) -}}
{{- fail "networkPolicy.egress.enabled needs networkPolicy.egress.databaseTo: the peers where MySQL is (e.g. [{ipBlock: {cidr: 10.0.5.10/32}}])" -}}
{{- end -}}
{{- end -}}

{{/* The folder of each namespace's webhook signing secrets. */}}
{{- define "orbit.webhookSecretsDir" -}}
/etc/orbit/webhook-secrets
{{- end -}}
