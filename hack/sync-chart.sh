#!/usr/bin/env bash
# Regenerates the chart's copies of generated manifests from config/ (run by `make manifests`;
# CI fails when the committed chart differs):
#   config/crd/bases/*.yaml   -> charts/condense/templates/crds/*.yaml  (gated by crds.enabled, kept by crds.keep)
#   config/rbac/role.yaml     -> the ClusterRole rules of charts/condense/templates/rbac.yaml
#   config/rbac/leader_election_role.yaml -> the leader-election Role rules of the same file
set -euo pipefail
cd "$(dirname "$0")/.."
chart=charts/condense
rm -f "$chart"/templates/crds/*.yaml
for f in config/crd/bases/*.yaml; do
	[ -e "$f" ] || continue
	out="$chart/templates/crds/$(basename "$f")"
	{
		echo '{{- if .Values.crds.enabled }}'
		# Drop the leading document marker; add the keep policy and chart labels to metadata.
		awk '
			NR==1 && $0=="---" { next }
			/^metadata:$/ && !done {
				print
				print "  labels:"
				print "    {{- include \"condense.labels\" . | nindent 4 }}"
				inmeta=1; next
			}
			inmeta && /^  annotations:$/ {
				print
				print "    {{- if .Values.crds.keep }}"
				print "    helm.sh/resource-policy: keep"
				print "    {{- end }}"
				inmeta=0; done=1; next
			}
			{ print }
		' "$f"
		echo '{{- end }}'
	} >"$out"
done
role=config/rbac/role.yaml
leader=config/rbac/leader_election_role.yaml
if [ -e "$role" ] && [ -e "$leader" ]; then
	{
		cat <<'HDR'
{{- if .Values.rbac.create }}
# Rules generated from the operator's +kubebuilder:rbac markers (config/rbac/role.yaml).
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {{ include "condense.fullname" . }}-manager
  labels:
    {{- include "condense.labels" . | nindent 4 }}
HDR
		sed -n '/^rules:/,$p' "$role"
		cat <<'MID'
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: {{ include "condense.fullname" . }}-manager
  labels:
    {{- include "condense.labels" . | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: {{ include "condense.fullname" . }}-manager
subjects:
  - kind: ServiceAccount
    name: {{ include "condense.serviceAccountName" . }}
    namespace: {{ .Release.Namespace }}
---
# Leader election (namespaced).
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: {{ include "condense.fullname" . }}-leader-election
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "condense.labels" . | nindent 4 }}
MID
		sed -n '/^rules:/,$p' "$leader"
		cat <<'FTR'
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: {{ include "condense.fullname" . }}-leader-election
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "condense.labels" . | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: {{ include "condense.fullname" . }}-leader-election
subjects:
  - kind: ServiceAccount
    name: {{ include "condense.serviceAccountName" . }}
    namespace: {{ .Release.Namespace }}
{{- end }}
FTR
	} >"$chart/templates/rbac.yaml"
fi
