{{/* Object-name prefix: the release name, unless overridden (Helm's usual fullname). */}}
{{- define "daiku.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "daiku.actuator" -}}{{ include "daiku.fullname" . }}-actuator{{- end -}}
{{- define "daiku.scheduler" -}}{{ include "daiku.fullname" . }}-scheduler{{- end -}}
{{- define "daiku.settings" -}}{{ include "daiku.fullname" . }}-settings{{- end -}}

{{/* Labels on every object. */}}
{{- define "daiku.labels" -}}
app.kubernetes.io/part-of: daiku
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "daiku.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end -}}

{{/* Pod and container security: what the namespace's "restricted" Pod Security Standard asks. */}}
{{- define "daiku.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "daiku.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop: ["ALL"]
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* daiku must not run on nodes it may remove. */}}
{{- define "daiku.affinity" -}}
nodeAffinity:
  requiredDuringSchedulingIgnoredDuringExecution:
    nodeSelectorTerms:
      - matchExpressions:
          - key: daiku.dev/nodepool
            operator: DoesNotExist
          - key: karpenter.sh/nodepool
            operator: DoesNotExist
{{- end -}}

{{/* Spread over zones (hard) and hosts (soft); the argument is the pods' name label. */}}
{{- define "daiku.topologySpread" -}}
- maxSkew: 1
  topologyKey: topology.kubernetes.io/zone
  whenUnsatisfiable: DoNotSchedule
  labelSelector:
    matchLabels:
      app.kubernetes.io/name: {{ . }}
- maxSkew: 1
  topologyKey: kubernetes.io/hostname
  whenUnsatisfiable: ScheduleAnyway
  labelSelector:
    matchLabels:
      app.kubernetes.io/name: {{ . }}
{{- end -}}

{{/* A Secret's existing data (kept across upgrades), or nothing on a first install. */}}
{{- define "daiku.existingSecretData" -}}
{{- $secret := lookup "v1" "Secret" .namespace .name -}}
{{- if $secret }}{{ toJson $secret.data }}{{ else }}{}{{ end -}}
{{- end -}}
