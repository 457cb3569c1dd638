"""Bad values fail at install time, each with a message that names what to fix.

values.schema.json checks shapes (helm reports the path and the rule); the
template guard in _helpers.tpl ("ptah.validate") checks what spans two values
and says so in a sentence. Every row starts from the required values, which
render: the control row proves that, so each refusal below is the row's doing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.chartrender import VALUES, Helm

DIGEST = "sha256:" + "a" * 64
PEM = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"

# (id, values laid over the required ones, message substring; None means it renders).
# Overrides go through a values file, not --set, so a string stays a string.
ROWS: list[tuple[str, dict[str, Any], str | None]] = [
    ("the required values alone render", {}, None),
    (
        "a tag instead of a digest",
        {"image": {"tag": "1.0"}},
        "at '/image': additional properties 'tag' not allowed",
    ),
    (
        "a tag inside the repository",
        {"image": {"repository": "registry.example.com/ptah/ptah-operator:1.0"}},
        "at '/image/repository': 'registry.example.com/ptah/ptah-operator:1.0' does not match",
    ),
    (
        "a registry port is not a tag",
        {"image": {"repository": "registry.example.com:5000/ptah/ptah-operator"}},
        None,
    ),
    ("a digest that is a tag", {"image": {"digest": "latest"}}, "at '/image/digest': 'latest'"),
    (
        "a short digest",
        {"image": {"digest": "sha256:abc"}},
        "at '/image/digest': 'sha256:abc' does not match",
    ),
    (
        "an executor image by tag",
        {"execution": {"executorImage": "registry.example.com/ptah/executor:1.4.2"}},
        "at '/execution/executorImage'",
    ),
    (
        "scratch images pinned by digest",
        {
            "execution": {
                "scratchImages": {
                    "postgresql": f"registry.example.com/ptah/scratch-postgresql@{DIGEST}",
                    "mysql": f"registry.example.com/ptah/scratch-mariadb@{DIGEST}",
                }
            }
        },
        None,
    ),
    (
        "a scratch image by tag",
        {"execution": {"scratchImages": {"mysql": "registry.example.com/ptah/mariadb:11"}}},
        "at '/execution/scratchImages/mysql'",
    ),
    (
        "a scratch image for an engine the chart does not know",
        {"execution": {"scratchImages": {"oracle": f"r.example/oracle@{DIGEST}"}}},
        "at '/execution/scratchImages': additional properties 'oracle' not allowed",
    ),
    (
        "a runner image with an upper-case digest",
        {"execution": {"runnerImage": "registry.example.com/ptah/runner@" + DIGEST.upper()}},
        "at '/execution/runnerImage'",
    ),
    (
        "a Ptah version padded with space",
        {"execution": {"ptahVersion": "1.4.2 "}},
        "at '/execution/ptahVersion': '1.4.2 ' does not match",
    ),
    ("no replicas", {"replicaCount": 0}, "at '/replicaCount': minimum: got 0, want 1"),
    ("a misspelled key", {"replicas": 3}, "additional properties 'replicas' not allowed"),
    (
        "two managers without leader election",
        {"leaderElection": {"enabled": False}},
        "replicaCount > 1 needs leaderElection.enabled=true",
    ),
    (
        "one manager without leader election",
        {
            "leaderElection": {"enabled": False},
            "replicaCount": 1,
            "podDisruptionBudget": {"enabled": False},
        },
        None,
    ),
    (
        "a renew deadline past the lease",
        {"leaderElection": {"renewDeadlineSeconds": 20}},
        "leaseDurationSeconds > renewDeadlineSeconds > retryPeriodSeconds",
    ),
    (
        "a status webhook slower than 10 seconds",
        {"webhook": {"timeoutSeconds": 30}},
        "at '/webhook/timeoutSeconds': maximum: got 30, want 10",
    ),
    (
        "a controller-write timeout beyond the Kubernetes maximum",
        {"webhook": {"controllerWriteTimeoutSeconds": 31}},
        "at '/webhook/controllerWriteTimeoutSeconds': maximum: got 31, want 30",
    ),
    (
        "a privileged port for a non-root manager",
        {"webhook": {"port": 443}},
        "at '/webhook/port': minimum: got 443, want",
    ),
    (
        "one port for admission and metrics",
        {"webhook": {"port": 8080}},
        "webhook.port and metrics.port must differ",
    ),
    (
        "a CA bundle without the Secret it verifies",
        {"webhook": {"caBundle": PEM}},
        "webhook.caBundle needs webhook.existingSecret",
    ),
    (
        "a Secret without the CA bundle that verifies it",
        {"webhook": {"existingSecret": "my-serving-cert"}},
        "webhook.existingSecret needs webhook.caBundle",
    ),
    (
        "a CA bundle that is not PEM",
        {"webhook": {"caBundle": "not-a-certificate", "existingSecret": "s"}},
        "at '/webhook/caBundle'",
    ),
    (
        "a coordination namespace that is not a DNS label",
        {"coordination": {"namespace": "Ptah_Leases"}},
        "at '/coordination/namespace'",
    ),
    (
        "a Pod label the selector owns",
        {"podLabels": {"app.kubernetes.io/component": "other"}},
        "podLabels may not set app.kubernetes.io/component",
    ),
    (
        "a budget no drain could ever satisfy",
        {"podDisruptionBudget": {"minAvailable": 2}},
        "podDisruptionBudget.minAvailable must be below replicaCount",
    ),
    (
        "lab fault points with a production executor",
        {"lab": {"faultPoints": True}},
        "lab.faultPoints and lab.swapSteps are for the lab's fault suite only",
    ),
    (
        "lab swapped steps with a production executor",
        {"lab": {"swapSteps": "mark,create"}},
        "lab.faultPoints and lab.swapSteps are for the lab's fault suite only",
    ),
    (
        "lab fault points with an executor only named like the stand-in",
        {
            "lab": {"faultPoints": True},
            "execution": {"executorImage": f"r.example/ptah-lab-executor-prod@{DIGEST}"},
        },
        "lab.faultPoints and lab.swapSteps are for the lab's fault suite only",
    ),
    (
        "lab fault points with the lab's stand-in executor render",
        {
            "lab": {"faultPoints": True, "swapSteps": "mark,create"},
            "execution": {"executorImage": f"10.88.0.1:5000/ptah/ptah-lab-executor@{DIGEST}"},
        },
        None,
    ),
    ("lab swapped steps that are not two", {"lab": {"swapSteps": "mark"}}, "at '/lab/swapSteps'"),
    (
        "four-eyes and the groups that may waive approval render",
        {"approvals": {"requireDistinctApprover": True, "applyAlwaysGroups": ["platform"]}},
        None,
    ),
    (
        "four-eyes spelled as a string",
        {"approvals": {"requireDistinctApprover": "true"}},
        "at '/approvals/requireDistinctApprover'",
    ),
    (
        "one group instead of a list",
        {"approvals": {"applyAlwaysGroups": "platform"}},
        "at '/approvals/applyAlwaysGroups'",
    ),
    (
        "an empty group name",
        {"approvals": {"applyAlwaysGroups": ["platform", ""]}},
        "at '/approvals/applyAlwaysGroups/1'",
    ),
    (
        "a misspelled approvals key",
        {"approvals": {"requireDistinctApprovers": True}},
        "additional properties 'requireDistinctApprovers' not allowed",
    ),
]


@pytest.mark.parametrize(("overrides", "message"), [r[1:] for r in ROWS], ids=[r[0] for r in ROWS])
def test_bad_values_fail_with_a_message_that_names_them(
    helm: Helm, tmp_path: Path, overrides: dict[str, Any], message: str | None
) -> None:
    layer = tmp_path / "overrides.yaml"
    layer.write_text(yaml.safe_dump(overrides))
    result = helm.template([VALUES / "required.yaml", layer])
    if message is None:
        assert result.returncode == 0, result.stderr
    else:
        assert result.returncode != 0, f"rendered although {message!r} was expected"
        assert message in result.stderr


def test_the_chart_defaults_alone_name_every_missing_value(helm: Helm) -> None:
    result = helm.template()
    assert result.returncode != 0
    assert "at '/image': missing properties 'repository', 'digest'" in result.stderr
    assert (
        "at '/execution': missing properties 'executorImage', 'runnerImage', 'ptahVersion'"
        in result.stderr
    )
