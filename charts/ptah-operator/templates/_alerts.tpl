{{/*
The alert rules, one group, shared by the PrometheusRule (prometheusrule.yaml) and
the plain rules file for a Prometheus without the operator (docs/prometheus/
ptah-alerts.yaml, rendered from this with the default thresholds; a test holds
the two equal). Every alert is a state the specification says a person must act
on, or one that hides them (no leader: no pass runs and the domain gauges vanish).
The domain gauges come from the leader only, so each rule aggregates with max/min
over the replicas. Every alert links its runbook, the section of docs/runbooks.md
headed by its name: <runbookBaseURL>#<alert in lower case> (the heading's anchor).
*/}}
{{- define "ptah.metricSelector" -}}
{{- $rule := .Values.monitoring.prometheusRule -}}
{{- if $rule.metricSelector -}}
{{ $rule.metricSelector }}
{{- else -}}
namespace="{{ .Release.Namespace }}",service="{{ include "ptah.metricsServiceName" . }}"
{{- end -}}
{{- end -}}

{{/* An alert's runbook: the section of docs/runbooks.md its name heads, whose anchor
is the name in lower case. Quoted: a URL may hold what YAML reads otherwise. */}}
{{- define "ptah.runbookURL" -}}
{{- $rule := index . 0 -}}
{{- printf "%s#%s" $rule.runbookBaseURL (lower (index . 1)) | quote -}}
{{- end -}}

{{- define "ptah.alertRules" -}}
{{- $rule := .Values.monitoring.prometheusRule -}}
{{- $t := $rule.thresholds -}}
{{- $sel := include "ptah.metricSelector" . -}}
- name: ptah-operator
  rules:
    - alert: PtahUnknownOutcome
      expr: max by (kind) (ptah_unresolved_attempts{ {{- $sel }},outcome="Unknown"}) > 0
      for: {{ $t.unknownOutcomeFor }}
      labels:
        severity: warning
      annotations:
        summary: "An Apply's outcome is unknown ({{ "{{" }} $labels.kind {{ "}}" }})."
        description: "{{ "{{" }} $value {{ "}}" }} {{ "{{" }} $labels.kind {{ "}}" }} resource(s) hold an attempt nobody knows the outcome of; no Apply is claimed there until a reading or a person settles it."
        runbook_url: {{ include "ptah.runbookURL" (list $rule "PtahUnknownOutcome") }}
    - alert: PtahUnresolvedRun
      expr: time() - min by (kind) (ptah_unresolved_attempt_oldest_timestamp_seconds{ {{- $sel }},kind="PtahMigration"}) > {{ $t.unresolvedRunSeconds }}
      for: 1m
      labels:
        severity: critical
      annotations:
        summary: "A migration run has stood unresolved for more than {{ $t.unresolvedRunSeconds }}s."
        description: "The oldest unresolved migration run was recorded {{ "{{" }} $value | humanizeDuration {{ "}}" }} ago; only a History reading or a PtahMigrationRunAcknowledgment settles it."
        runbook_url: {{ include "ptah.runbookURL" (list $rule "PtahUnresolvedRun") }}
    - alert: PtahProofCannotFinish
      expr: max(ptah_pending_proofs_failing{ {{- $sel }}}) > 0
      for: {{ $t.proofFailingFor }}
      labels:
        severity: critical
      annotations:
        summary: "A schema owes the proof of an Apply and its reading keeps failing."
        description: "{{ "{{" }} $value {{ "}}" }} schema(s) owe a proof whose reading fails; the schema is blocked until a reading succeeds, a person settles the proof, or the schema is deleted."
        runbook_url: {{ include "ptah.runbookURL" (list $rule "PtahProofCannotFinish") }}
    - alert: PtahLockReleaseOwed
      expr: max by (kind) (ptah_lock_releases_owed{ {{- $sel }}}) > 0
      for: {{ $t.releaseOwedFor }}
      labels:
        severity: warning
      annotations:
        summary: "A database realm's Lease release is owed and not performed ({{ "{{" }} $labels.kind {{ "}}" }})."
        description: "{{ "{{" }} $value {{ "}}" }} resource(s) record a release they could not perform; other work on that database waits until it is released or the Lease expires."
        runbook_url: {{ include "ptah.runbookURL" (list $rule "PtahLockReleaseOwed") }}
    - alert: PtahClaimStuck
      expr: max by (kind) (ptah_claims_overdue{ {{- $sel }}}) > 0
      for: {{ $t.claimStuckFor }}
      labels:
        severity: warning
      annotations:
        summary: "A claim is past its dispatch window or Job deadline ({{ "{{" }} $labels.kind {{ "}}" }})."
        description: "{{ "{{" }} $value {{ "}}" }} claim(s) are past the time they should have been harvested or retired."
        runbook_url: {{ include "ptah.runbookURL" (list $rule "PtahClaimStuck") }}
    - alert: PtahResourcesOverdue
      expr: max by (kind) (ptah_resources_overdue{ {{- $sel }}}) > 0
      for: {{ $t.overdueFor }}
      labels:
        severity: warning
      annotations:
        summary: "Resources are overdue for their interval ({{ "{{" }} $labels.kind {{ "}}" }})."
        description: "{{ "{{" }} $value {{ "}}" }} resource(s) with no claim are past their next reconciliation time."
        runbook_url: {{ include "ptah.runbookURL" (list $rule "PtahResourcesOverdue") }}
    - alert: PtahWebhookCertificateExpiring
      expr: min(ptah_webhook_certificate_expiry_timestamp_seconds{ {{- $sel }}} > 0) - time() < {{ $t.certificateExpirySeconds }}
      for: 10m
      labels:
        severity: warning
      annotations:
        summary: "The webhook's serving certificate expires soon."
        description: "The served certificate expires in {{ "{{" }} $value | humanizeDuration {{ "}}" }}; when it does, every controller write is refused."
        runbook_url: {{ include "ptah.runbookURL" (list $rule "PtahWebhookCertificateExpiring") }}
    - alert: PtahAdmissionUnavailable
      expr: (max(ptah_webhook_ready{ {{- $sel }}}) < 1) or absent(ptah_webhook_ready{ {{- $sel }}})
      for: {{ $t.admissionUnavailableFor }}
      labels:
        severity: critical
      annotations:
        summary: "No manager replica can admit."
        description: "No replica reports its webhook ready (or none is scraped); the fail-closed webhooks refuse the operator's Jobs and status writes meanwhile."
        runbook_url: {{ include "ptah.runbookURL" (list $rule "PtahAdmissionUnavailable") }}
    - alert: PtahNoLeader
      expr: (max(ptah_controller_leader{ {{- $sel }}}) < 1) or absent(ptah_controller_leader{ {{- $sel }}})
      for: {{ $t.noLeaderFor }}
      labels:
        severity: critical
      annotations:
        summary: "No manager replica leads; no pass runs."
        description: "Without a leader nothing is claimed, harvested or released, and the outcome gauges (which only the leader reports) are absent, so the alerts above cannot fire."
        runbook_url: {{ include "ptah.runbookURL" (list $rule "PtahNoLeader") }}
        {{- end -}}
