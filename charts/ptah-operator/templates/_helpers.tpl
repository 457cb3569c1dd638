{{/*
Names are not derived from the release name: the webhook configurations, the
admission policies and the ClusterRoles are cluster-scoped and fixed, so there is
one ptah-operator per cluster (a second release would collide on them, and Helm
refuses to take over objects another release owns). fullnameOverride renames the
namespaced objects (the Deployment, its budget, the Services, the Secret, the
rotator's CronJob, Job, ServiceAccount and Role); nameOverride the
app.kubernetes.io/name label. The manager's identity
(system:serviceaccount:<namespace>:<serviceAccount name>) is written into the
admission rules that trust it, from the same helper.
*/}}
{{- define "ptah.name" -}}
{{ .Values.nameOverride | default "ptah-operator" | trunc 63 | trimSuffix "-" }}
{{- end -}}

{{- define "ptah.fullname" -}}
{{ .Values.fullnameOverride | default "ptah-operator" | trunc 40 | trimSuffix "-" }}
{{- end -}}

{{/* serviceAccount.name, else the full name when the chart creates it. */}}
{{- define "ptah.serviceAccountName" -}}
{{ .Values.serviceAccount.name | default (include "ptah.fullname" .) }}
{{- end -}}

{{/* The username the API server gives the manager's requests; admission trusts only it. */}}
{{- define "ptah.managerUsername" -}}
system:serviceaccount:{{ .Release.Namespace }}:{{ include "ptah.serviceAccountName" . }}
{{- end -}}

{{- define "ptah.coordinationNamespace" -}}
{{ .Values.coordination.namespace | default .Release.Namespace }}
{{- end -}}

{{- define "ptah.webhookServiceName" -}}{{ include "ptah.fullname" . }}-webhook{{- end -}}

{{- define "ptah.metricsServiceName" -}}{{ include "ptah.fullname" . }}-metrics{{- end -}}

{{- define "ptah.generatedSecretName" -}}{{ include "ptah.fullname" . }}-webhook-tls{{- end -}}

{{- define "ptah.webhookSecretName" -}}
{{ .Values.webhook.existingSecret | default (include "ptah.generatedSecretName" .) }}
{{- end -}}

{{- define "ptah.controllerWriteWebhookName" -}}ptah-operator-controller-write{{- end -}}

{{- define "ptah.managerStateWebhookName" -}}ptah-operator-manager-state{{- end -}}

{{- define "ptah.decisionsWebhookName" -}}ptah-operator-decisions{{- end -}}

{{- define "ptah.stampWebhookName" -}}ptah-operator-stamp{{- end -}}

{{- define "ptah.labels" -}}
app.kubernetes.io/name: {{ include "ptah.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: ptah-operator
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/*
The manager Pods' selector. component=manager keeps it apart from the operation
Pods, which carry app.kubernetes.io/managed-by=ptah-operator and a component of
schema-operation or migration-operation: a Service selecting them would send
admission requests to a database Job.
*/}}
{{- define "ptah.selectorLabels" -}}
app.kubernetes.io/name: {{ include "ptah.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: manager
{{- end -}}

{{- define "ptah.managerImage" -}}
{{ printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- end -}}

{{/*
Rules values.schema.json cannot state, each refused with a sentence saying what to
change. Included by every template that depends on them, so `helm template -s`
of one file still checks them.
*/}}
{{- define "ptah.validate" -}}
{{- if and (gt (int .Values.replicaCount) 1) (not .Values.leaderElection.enabled) -}}
{{- fail "replicaCount > 1 needs leaderElection.enabled=true: two managers without leader election would both dispatch the same work" -}}
{{- end -}}
{{- $le := .Values.leaderElection -}}
{{- if not (and (gt (int $le.leaseDurationSeconds) (int $le.renewDeadlineSeconds)) (gt (int $le.renewDeadlineSeconds) (int $le.retryPeriodSeconds))) -}}
{{- fail "leaderElection needs leaseDurationSeconds > renewDeadlineSeconds > retryPeriodSeconds, or a leader could lose its Lease while it still acts as leader" -}}
{{- end -}}
{{- if and .Values.webhook.caBundle (not .Values.webhook.existingSecret) -}}
{{- fail "webhook.caBundle needs webhook.existingSecret: the chart cannot issue a serving certificate under a CA whose key it does not have. Give the Secret that holds the certificate, or leave both empty to let the chart issue one" -}}
{{- end -}}
{{- if and .Values.webhook.existingSecret (not .Values.webhook.caBundle) -}}
{{- fail "webhook.existingSecret needs webhook.caBundle: the API server must be told which CA verifies the certificate in that Secret" -}}
{{- end -}}
{{- if eq (int .Values.webhook.port) (int .Values.metrics.port) -}}
{{- fail "webhook.port and metrics.port must differ: one serves HTTPS admission, the other plain-HTTP metrics" -}}
{{- end -}}
{{- range $key, $_ := .Values.podLabels -}}
{{- if or (hasPrefix "app.kubernetes.io/" $key) (eq $key "helm.sh/chart") -}}
{{- fail (printf "podLabels may not set %s: the chart sets the app.kubernetes.io/ labels, and the Services and the PodDisruptionBudget select the manager Pods by them" $key) -}}
{{- end -}}
{{- end -}}
{{- if and (or .Values.lab.faultPoints .Values.lab.swapSteps) (ne (regexReplaceAll "^(.*/)?([^/@]*)@.*$" (toString .Values.execution.executorImage) "${2}") "ptah-lab-executor") -}}
{{- fail "lab.faultPoints and lab.swapSteps are for the lab's fault suite only: they need execution.executorImage to be the lab's stand-in executor (a repository named ptah-lab-executor)" -}}
{{- end -}}
{{- if and (not .Values.serviceAccount.create) (not .Values.serviceAccount.name) -}}
{{- fail "serviceAccount.create=false needs serviceAccount.name: the manager must run as a ServiceAccount the admission rules can name" -}}
{{- end -}}
{{- range .Values.extraEnv -}}
{{- if or (hasPrefix "PTAH_" .name) (has .name (list "POD_NAME" "POD_NAMESPACE" "PYTHONDONTWRITEBYTECODE" "PYTHONUNBUFFERED")) -}}
{{- fail (printf "extraEnv may not set %s: the chart sets the manager's own variables from its values (README, \"The manager container\")" .name) -}}
{{- end -}}
{{- end -}}
{{- if and (or (eq .Release.Namespace "default") (hasPrefix "kube-" .Release.Namespace)) (not .Values.allowSystemReleaseNamespace) -}}
{{- fail (printf "the release namespace may not be %s: the manager's ServiceAccount and the webhook's serving Secret would sit beside what else runs there, readable by whoever administers it. Install into a namespace of its own (--namespace ptah-system --create-namespace), or set allowSystemReleaseNamespace=true if this is what you mean" .Release.Namespace) -}}
{{- end -}}
{{- if and .Values.podDisruptionBudget.enabled (ge (int .Values.podDisruptionBudget.minAvailable) (int .Values.replicaCount)) -}}
{{- fail "podDisruptionBudget.minAvailable must be below replicaCount, or no manager Pod could ever be evicted and every node drain would stall; lower it, raise replicaCount, or set podDisruptionBudget.enabled=false" -}}
{{- end -}}
{{- end -}}

{{/*
CEL: the request comes from the manager. Only the username is compared, never a
group: every ServiceAccount in the namespace shares the namespace's group.
*/}}
{{- define "ptah.cel.isManager" -}}
request.userInfo.username == '{{ include "ptah.managerUsername" . }}'
{{- end -}}

{{/*
CEL: the request adds, removes or changes the unresolved-run annotation. Each
side is a list of zero or one value, so "absent" and "present but empty" differ.
Shared by the manager-state webhook's match condition and the admission policy,
so the two cannot disagree about what a change is.
*/}}
{{- define "ptah.cel.unresolvedRunChanged" -}}
{{- $key := "operator.ptah.run/unresolved-run" -}}
(has(object.metadata.annotations) && '{{ $key }}' in object.metadata.annotations ? [object.metadata.annotations['{{ $key }}']] : []) != (has(oldObject.metadata.annotations) && '{{ $key }}' in oldObject.metadata.annotations ? [oldObject.metadata.annotations['{{ $key }}']] : [])
{{- end -}}

{{/*
CEL: a create, or an update that changes the spec or the spec-writer record. The
record is written by the stamp webhook alone, so both the mutating and the
validating webhook see exactly these writes; a finalizer or annotation patch by the
manager never waits on them. `||` short-circuits, so a create never reads oldObject.
*/}}
{{- define "ptah.cel.specOrWriterChanged" -}}
{{- $key := "operator.ptah.run/spec-last-changed-by" -}}
request.operation == 'CREATE' || object.spec != oldObject.spec || (has(object.metadata.annotations) && '{{ $key }}' in object.metadata.annotations ? [object.metadata.annotations['{{ $key }}']] : []) != (has(oldObject.metadata.annotations) && '{{ $key }}' in oldObject.metadata.annotations ? [oldObject.metadata.annotations['{{ $key }}']] : [])
{{- end -}}

{{/*
A webhook entry's caBundle: only the one the user gave with webhook.existingSecret.
Otherwise none is rendered, and the rotator or cert-manager's CA injector owns the
field in the cluster; Helm's three-way merge and GitOps leave a field alone that the
chart never renders.
*/}}
{{- define "ptah.caBundle" -}}
{{- if .Values.webhook.existingSecret -}}
caBundle: {{ .Values.webhook.caBundle | b64enc }}
{{- end -}}
{{- end -}}

{{/*
CEL: the update changes nothing of the object but its finalizers and the
unresolved-run annotation: spec, labels, owner references and every other
annotation are as they were. The status of a kind with a status subresource is
not written by an update of the main resource, so it needs no comparison here.
*/}}
{{- define "ptah.cel.onlyFinalizersAndRunCopy" -}}
{{- $key := "operator.ptah.run/unresolved-run" -}}
object.spec == oldObject.spec && (has(object.metadata.labels) ? object.metadata.labels : {}) == (has(oldObject.metadata.labels) ? oldObject.metadata.labels : {}) && (has(object.metadata.ownerReferences) ? object.metadata.ownerReferences : []) == (has(oldObject.metadata.ownerReferences) ? oldObject.metadata.ownerReferences : []) && (has(object.metadata.annotations) ? object.metadata.annotations : {}).all(k, k == '{{ $key }}' || (has(oldObject.metadata.annotations) && k in oldObject.metadata.annotations && oldObject.metadata.annotations[k] == object.metadata.annotations[k])) && (has(oldObject.metadata.annotations) ? oldObject.metadata.annotations : {}).all(k, k == '{{ $key }}' || (has(object.metadata.annotations) && k in object.metadata.annotations))
{{- end -}}

{{/*
CEL: the write makes spec.policy.apply Always: a create that says Always, or an
update to Always from anything else (absent means the default, OnApproval). An
update that leaves an Always as it was is not matched. `||` and `&&` short-circuit,
so a create never reads oldObject and an absent policy is never indexed.
*/}}
{{- define "ptah.cel.makesApplyAlways" -}}
has(object.spec.policy) && has(object.spec.policy.apply) && object.spec.policy.apply == 'Always' && (request.operation == 'CREATE' || !has(oldObject.spec.policy) || !has(oldObject.spec.policy.apply) || oldObject.spec.policy.apply != 'Always')
{{- end -}}

{{- define "ptah.rotatorServiceAccountName" -}}{{ include "ptah.fullname" . }}-cert-rotator{{- end -}}

{{/*
Whether the chart's own rotator keeps the certificates alive: only for the
certificate the chart issued (not a Secret brought by the user, not cert-manager's).
*/}}
{{- define "ptah.rotatorEnabled" -}}
{{- if and (not .Values.webhook.existingSecret) (not .Values.webhook.certManager.enabled) -}}true{{- end -}}
{{- end -}}
