"""What a security reviewer reads: the decision log line (and what it never holds), the
metrics, the generated rules document, ``explain``, and the layering that keeps the
webhook on ``jobclaim`` alone."""

from __future__ import annotations

import ast
import io
import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import webhook
from tests.support.webhookscenes import PINS, SETTINGS, Scene, decide, job_create, status_write
from webhook import REGISTRY, Engine, Outcome, StateReader
from webhook.__main__ import main
from webhook.docs import DOCUMENT_ORDER, render
from webhook.explain import endpoint_of
from webhook.observability import Metrics, decision_record, log_decision

ROOT = Path(__file__).resolve().parents[2]
SECRETS = ("JTI=secret-token-id-1", "s3cr3t-value", "ptah-operator-7d9f-abcde")


def logged(outcome: Outcome, endpoint: str = "controller-write") -> str:
    stream = io.StringIO()
    logger = logging.getLogger("tests.webhook.audit")
    handler = logging.StreamHandler(stream)
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        log_decision(endpoint, outcome, 0.0015, logger)  # type: ignore[arg-type]
    finally:
        logger.removeHandler(handler)
    return stream.getvalue()


def test_a_decision_is_one_json_line_naming_who_what_and_why() -> None:
    scene = job_create("schema", "Apply")
    line = logged(decide(scene))
    assert line.count("\n") == 1
    record = json.loads(line)
    assert record == {
        "event": "admission.decision",
        "endpoint": "controller-write",
        "uid": scene.uid,
        "user": "system:serviceaccount:ptah-system:ptah-operator",
        "operation": "CREATE",
        "resource": "batch/v1/jobs",
        "namespace": "shop",
        "name": scene.obj["metadata"]["name"] if scene.obj else "",
        "dryRun": False,
        "rule": "job-create",
        "verdict": "allowed",
        "code": 200,
        "reason": "write matches the operator admission contract",
        "durationMs": 1.5,
    }


def with_secret(scene: Scene) -> Scene:
    assert scene.obj is not None
    scene.obj["metadata"]["annotations"]["example.com/token"] = "s3cr3t-value"
    scene.obj["spec"]["template"]["spec"]["containers"][0]["env"].append(
        {"name": "PASSWORD", "value": "s3cr3t-value"}
    )
    return scene


def test_no_secret_value_reaches_the_log() -> None:
    denied = decide(with_secret(job_create("schema", "Apply")))
    assert not denied.decision.allowed
    review = with_secret(job_create("schema", "Apply")).review()
    # Field names are named in a 400 (that is the point); values never are.
    review["request"]["object"]["metadata"]["shadow"] = "s3cr3t-value"
    review["request"]["options"]["fieldManager"] = ["s3cr3t-value"]
    malformed = engine_decide(json.dumps(review).encode())
    assert malformed.http_status == 400
    duplicate = json.dumps(job_create("schema", "Apply").review()).replace(
        '"uid": ', '"uid": "s3cr3t-value", "uid": ', 1
    )
    for outcome in (denied, malformed, engine_decide(duplicate.encode())):
        line = logged(outcome)
        for secret in SECRETS:
            assert secret not in line, (secret, line)


def engine_decide(body: bytes) -> Outcome:
    engine = Engine(StateReader(job_create("schema", "Apply").objects), SETTINGS)
    try:
        return engine.decide("controller-write", body)
    finally:
        engine.close()


def test_a_status_write_is_logged_with_its_subresource() -> None:
    record = decision_record("manager-state", decide(status_write("jane"), "manager-state"), 0)
    assert record["resource"] == "operator.ptah.run/v1alpha1/ptahschemas/status"
    assert (record["user"], record["verdict"], record["code"]) == ("jane", "denied", 403)


def test_the_latency_histogram_is_cumulative_and_labels_are_escaped() -> None:
    metrics = Metrics(buckets=(0.01, 0.1))
    outcome = decide(job_create("schema", "Plan"))
    for seconds in (0.005, 0.05, 5.0):
        metrics.observe("controller-write", outcome, seconds)
    lines = metrics.render().splitlines()
    assert (
        'ptah_webhook_decision_duration_seconds_bucket{endpoint="controller-write",le="0.01"} 1.0'
        in lines
    )
    assert (
        'ptah_webhook_decision_duration_seconds_bucket{endpoint="controller-write",le="0.1"} 2.0'
        in lines
    )
    assert (
        'ptah_webhook_decision_duration_seconds_bucket{endpoint="controller-write",le="+Inf"} 3.0'
        in lines
    )
    assert 'ptah_webhook_decision_duration_seconds_count{endpoint="controller-write"} 3.0' in lines
    odd = Metrics()
    odd.observe('a"b\\c', outcome, 0.0)  # type: ignore[arg-type]
    assert 'endpoint="a\\"b\\\\c"' in odd.render()


def test_the_committed_rules_document_is_the_generated_one() -> None:
    committed = (ROOT / "docs" / "admission-rules.md").read_text()
    assert committed == render(), "run: python -m webhook docs > docs/admission-rules.md"


def test_every_rule_is_documented_with_lower_case_sentences() -> None:
    assert set(DOCUMENT_ORDER) == set(REGISTRY)
    for rule in REGISTRY.values():
        assert rule.refusals, rule.id
        for refusal in rule.refusals:
            first = refusal.template[0]
            assert first.islower() or first == "{", refusal.template
            assert not refusal.template.endswith("."), refusal.template


# A fresh interpreter runs the module: integration, left to `make test`.
@pytest.mark.integration
def test_python_dash_m_webhook_docs_prints_the_document() -> None:
    printed = subprocess.run(
        [sys.executable, "-m", "webhook", "docs"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    assert printed == render()


def saved(tmp_path: Path, scene: Scene) -> tuple[Path, Path]:
    review = tmp_path / "review.json"
    review.write_text(json.dumps(scene.review(), indent=2))
    state = tmp_path / "state.yaml"
    state.write_text(yaml.safe_dump_all(scene.objects))
    return review, state


PIN_FLAGS = (
    f"--executor-image={PINS.executor_image}",
    f"--runner-image={PINS.runner_image}",
    f"--manager-image={PINS.manager_image}",
    f"--ptah-version={PINS.ptah_version}",
    # The chart's execution.scratchImages, which the scenes' binding names.
    f"--scratch-postgresql={PINS.scratch_images.postgresql if PINS.scratch_images else ''}",
    f"--scratch-mysql={PINS.scratch_images.mysql if PINS.scratch_images else ''}",
)


def test_explain_without_pins_admits_no_job(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for env in ("PTAH_EXECUTOR_IMAGE", "PTAH_RUNNER_IMAGE", "PTAH_MANAGER_IMAGE", "PTAH_VERSION"):
        monkeypatch.delenv(env, raising=False)
    review, state = saved(tmp_path, job_create("schema", "Apply"))
    assert main(["explain", str(review), "--objects", str(state)]) == 1
    assert "the webhook's configuration pins no images" in capsys.readouterr().out


def test_explain_prints_the_trail_and_the_verdict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    review, state = saved(tmp_path, job_create("schema", "Apply"))
    assert main(["explain", str(review), "--objects", str(state), *PIN_FLAGS]) == 0
    printed = capsys.readouterr().out
    for expected in (
        "endpoint: POST /validate-controller-write",
        "identity: the username is the configured manager identity",
        "owner: PtahSchema shop/orders read directly",
        "job-create: plan PtahSchemaPlan shop/",
        "job-authority: executor, scratch, runner and manager images and the ptah version are "
        "the pinned",
        "job-authority: PtahSchemaApproval shop/approve-1: stamped, this plan's fingerprint",
        "job-create: jobclaim.match: the Job is its claim's",
        "verdict: allowed (HTTP 200, code 200)",
    ):
        assert expected in printed, expected


def test_explain_names_the_refusal_and_exits_non_zero(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scene = job_create("schema", "Apply")
    assert scene.obj is not None
    scene.obj["spec"]["template"]["spec"]["hostPID"] = True
    review, state = saved(tmp_path, scene)
    assert main(["explain", str(review), "--objects", str(state), *PIN_FLAGS]) == 1
    printed = capsys.readouterr().out
    assert "verdict: denied (HTTP 200, code 403)" in printed
    assert "reason: the Job is outside the active operation intent: " in printed
    assert main(["explain", str(review)]) == 1  # no objects: the owner does not exist
    assert "controller owner PtahSchema shop/orders does not exist" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("scene", "endpoint"),
    [(job_create("schema", "Plan"), "controller-write"), (status_write(), "manager-state")],
)
def test_explain_infers_the_endpoint(scene: Scene, endpoint: str) -> None:
    assert endpoint_of(scene.review()) == endpoint


def imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


def test_only_the_wiring_module_touches_the_api_adapter() -> None:
    users = sorted(
        str(p.relative_to(ROOT)) for p in (ROOT / "webhook").glob("*.py") if "kube" in imports(p)
    )
    assert users == ["webhook/wiring.py"]


def test_only_serving_touches_the_certificates_package() -> None:
    users = sorted(p.name for p in (ROOT / "webhook").glob("*.py") if "certs" in imports(p))
    assert users == ["serving.py"]


def test_the_public_surface_is_explicit() -> None:
    assert sorted(webhook.__all__) == sorted(
        name for name in dir(webhook) if not name.startswith("_") and name in webhook.__all__
    )
    for name in webhook.__all__:
        getattr(webhook, name)
