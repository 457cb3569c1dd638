{{/*
The rotator's Pod template, shared by the CronJob and the install Job so that both
run the same program with the same grants, arguments and placement.
Arguments: root (the chart's context), indent, args (extra arguments).
*/}}
{{- define "ptah.rotatorPod" -}}
{{- $root := .root }}
{{- $ns := $root.Release.Namespace }}
{{- $ca := int $root.Values.webhook.selfSigned.caValidityDays }}
{{- $serving := int $root.Values.webhook.selfSigned.servingValidityDays }}
{{- $rotation := $root.Values.webhook.rotation }}
{{- $pod := dict }}
{{- $_ := set $pod "metadata" (dict "labels" (merge (dict "app.kubernetes.io/component" "cert-rotator") (include "ptah.labels" $root | fromYaml))) }}
{{- /* The CA is renewed with half its life left, the leaf with a third. --settle is
       long enough for the API server to load a published bundle and the kubelet to
       project the Secret into every manager Pod; a wait longer than --timeout ends
       the run (exit 3) and the next one goes on. --service lets a run create the
       Secret when it does not exist. The rotation works on a private copy of the
       Secret in /tmp, a small in-memory emptyDir. */}}
{{- $args := list
  (printf "--namespace=%s" $ns)
  (printf "--secret=%s" (include "ptah.generatedSecretName" $root))
  (printf "--service=%s" (include "ptah.webhookServiceName" $root))
  (printf "--validating=%s" (include "ptah.controllerWriteWebhookName" $root))
  (printf "--validating=%s" (include "ptah.managerStateWebhookName" $root))
  (printf "--validating=%s" (include "ptah.decisionsWebhookName" $root))
  (printf "--mutating=%s" (include "ptah.stampWebhookName" $root))
  (printf "--ca-validity=%dh" (mul $ca 24))
  (printf "--serving-validity=%dh" (mul $serving 24))
  (printf "--ca-renew-before=%dh" (mul $ca 12))
  (printf "--serving-renew-before=%dh" (min (mul $serving 8) (mul $ca 12)))
  (printf "--settle=%s" $rotation.settle)
  (printf "--timeout=%s" $rotation.timeout) }}
{{- $container := dict
  "name" "rotator"
  "image" (include "ptah.managerImage" $root)
  "imagePullPolicy" $root.Values.image.pullPolicy
  "command" (list "python3" "-m" "manager.rotator")
  "args" (concat $args .args)
  "env" (list (dict "name" "PYTHONDONTWRITEBYTECODE" "value" "1"))
  "resources" (dict "requests" (dict "cpu" "10m" "memory" "64Mi") "limits" (dict "memory" "128Mi"))
  "securityContext" (dict "allowPrivilegeEscalation" false "readOnlyRootFilesystem" true "capabilities" (dict "drop" (list "ALL")))
  "volumeMounts" (list (dict "name" "scratch" "mountPath" "/tmp")) }}
{{- $spec := dict
  "serviceAccountName" (include "ptah.rotatorServiceAccountName" $root)
  "automountServiceAccountToken" true
  "enableServiceLinks" false
  "restartPolicy" "Never"
  "securityContext" (dict "runAsNonRoot" true "runAsUser" 65532 "runAsGroup" 65532 "seccompProfile" (dict "type" "RuntimeDefault"))
  "containers" (list $container)
  "volumes" (list (dict "name" "scratch" "emptyDir" (dict "medium" "Memory" "sizeLimit" "1Mi"))) }}
{{- with $root.Values.imagePullSecrets }}{{ $_ := set $spec "imagePullSecrets" . }}{{ end }}
{{- with $rotation.priorityClassName }}{{ $_ := set $spec "priorityClassName" . }}{{ end }}
{{- with $rotation.nodeSelector }}{{ $_ := set $spec "nodeSelector" . }}{{ end }}
{{- with $rotation.tolerations }}{{ $_ := set $spec "tolerations" . }}{{ end }}
{{- with $rotation.affinity }}{{ $_ := set $spec "affinity" . }}{{ end }}
{{- $_ := set $pod "spec" $spec }}
{{- toYaml $pod | nindent .indent }}
{{- end -}}


{{/* The install Job's Pod template, and its name: a hash of that template. */}}
{{- define "ptah.certInitPod" -}}
{{- include "ptah.rotatorPod" (dict "root" . "indent" 4 "args" (list "--wait-for-configurations=5m")) }}
{{- end -}}

{{- define "ptah.certInitJobName" -}}
{{ printf "%s-cert-init-%s" (include "ptah.fullname" .) (include "ptah.certInitPod" . | sha256sum | trunc 10) }}
{{- end -}}
