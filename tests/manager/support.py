"""The environment a manager is started with, as the chart's defaults set it."""

from __future__ import annotations

from typing import Final

CHART_ENV: Final[dict[str, str]] = {
    "POD_NAME": "ptah-operator-7d9c-abcde",
    "POD_NAMESPACE": "ptah-system",
    "PTAH_MANAGER_USERNAME": "system:serviceaccount:ptah-system:ptah-operator",
    "PTAH_MANAGER_IMAGE": "registry.example.com/ptah/ptah-operator@sha256:" + "a" * 64,
    "PTAH_EXECUTOR_IMAGE": "registry.example.com/ptah/executor@sha256:" + "b" * 64,
    "PTAH_RUNNER_IMAGE": "registry.example.com/ptah/ptah-operator@sha256:" + "a" * 64,
    "PTAH_VERSION": "1.4.2",
    "PTAH_COORDINATION_NAMESPACE": "ptah-system",
    "PTAH_LEADER_ELECTION": "true",
    "PTAH_LEADER_ELECTION_LEASE_NAME": "ptah-operator-leader",
    "PTAH_LEADER_ELECTION_LEASE_DURATION_SECONDS": "15",
    "PTAH_LEADER_ELECTION_RENEW_DEADLINE_SECONDS": "10",
    "PTAH_LEADER_ELECTION_RETRY_PERIOD_SECONDS": "2",
    "PTAH_WEBHOOK_PORT": "9443",
    "PTAH_WEBHOOK_CERT_DIR": "/etc/ptah/webhook-certs",
    "PTAH_WEBHOOK_CONFIGURATIONS": "ptah-operator-controller-write,ptah-operator-manager-state",
    "PTAH_METRICS_PORT": "8080",
    "PTAH_LOG_LEVEL": "info",
    "PTAH_SHUTDOWN_SECONDS": "25",
}
