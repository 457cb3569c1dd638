"""A Job is its claim's only when every part matches: one control row, then one change
per row, for both families and every mode. Each refused row names its sentence, so a
check removed from ``match`` turns a row red."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import pytest

from jobclaim import CLEANUP_TTL_SECONDS, Claim, match
from tests.support.claimworld import BINDING, OTHER_EPOCH, World, migration_world, schema_world

MODES = ("rebuild-stored", "rebuild-submitted", "envelope")
WORLDS: dict[str, Callable[[], World]] = {
    "schema-apply": lambda: schema_world("Apply"),
    "schema-plan": lambda: schema_world("Plan"),
    "migration-apply": lambda: migration_world("Apply"),
    "migration-history": lambda: migration_world("History"),
}

Job = dict[str, Any]


@dataclass(frozen=True)
class Row:
    name: str
    change: Callable[[Job, Claim], tuple[Job, Claim]]
    # The sentence (a substring) per mode; "*" for every mode.
    reason: dict[str, str]

    def expected(self, mode: str) -> str:
        return self.reason.get(mode, self.reason.get("*", ""))


def job_only(fn: Callable[[Job], None]) -> Callable[[Job, Claim], tuple[Job, Claim]]:
    def change(job: Job, claim: Claim) -> tuple[Job, Claim]:
        fn(job)
        return job, claim

    return change


def claim_only(**changes: Any) -> Callable[[Job, Claim], tuple[Job, Claim]]:
    return lambda job, claim: (job, replace(claim, **changes))


def template(job: Job) -> dict[str, Any]:
    result: dict[str, Any] = job["spec"]["template"]
    return result


LABELS_REBUILD = "labels or annotations are not the ones its claim builds"
TEMPLATE_PIN = "Pod template does not match the persisted admission snapshot"

ROWS = [
    Row(
        "renamed",
        job_only(lambda j: j["metadata"].update(name=j["metadata"]["name"] + "x")),
        {"*": "name or namespace is not the one the claim reserved"},
    ),
    Row(
        "other namespace",
        job_only(lambda j: j["metadata"].update(namespace="elsewhere")),
        {"*": "name or namespace is not the one the claim reserved"},
    ),
    Row(
        "no UID",
        job_only(lambda j: j["metadata"].pop("uid")),
        {"*": "has no API-assigned identity"},
    ),
    Row(
        "another UID than recorded",
        claim_only(job_uid="recorded-uid"),
        {"*": "UID is not the one the claim recorded"},
    ),
    Row(
        "owner UID",
        job_only(lambda j: j["metadata"]["ownerReferences"][0].update(uid="other")),
        {"*": "controller owner is not"},
    ),
    Row(
        "owner not controller",
        job_only(lambda j: j["metadata"]["ownerReferences"][0].update(controller=False)),
        {"*": "controller owner is not"},
    ),
    Row(
        "owner without blockOwnerDeletion",
        job_only(lambda j: j["metadata"]["ownerReferences"][0].pop("blockOwnerDeletion")),
        {"*": "controller owner is not"},
    ),
    Row(
        "second owner",
        job_only(
            lambda j: j["metadata"]["ownerReferences"].append(
                {"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "y"}
            )
        ),
        {"*": "does not have exactly one owner"},
    ),
    Row(
        "claim under a retired epoch",
        claim_only(binding=BINDING.model_copy(update={"epoch": OTHER_EPOCH})),
        {"*": "no longer in force"},
    ),
    Row(
        "Job under another epoch",
        job_only(
            lambda j: j["metadata"]["annotations"].update(
                {"operator.ptah.run/execution-binding-id": OTHER_EPOCH}
            )
        ),
        {"*": "runs under another execution epoch than its claim"},
    ),
    Row(
        "foreign selector",
        job_only(lambda j: j["spec"]["selector"]["matchLabels"].update({"controller-uid": "x"})),
        {"*": "selector does not select the Job's own Pods"},
    ),
    Row(
        "selector with expressions",
        job_only(lambda j: j["spec"]["selector"].update(matchExpressions=[])),
        {"*": "selector is not the one the API server generates"},
    ),
    Row(
        "foreign generated label",
        job_only(lambda j: template(j)["metadata"]["labels"].update({"job-name": "other"})),
        {"*": "label job-name does not name the Job itself"},
    ),
    Row(
        "operation ID label",
        job_only(
            lambda j: j["metadata"]["labels"].update({"operator.ptah.run/operation-id": "0" * 16})
        ),
        {"*": LABELS_REBUILD, "envelope": "labels are not its claim's: operator.ptah.run/op"},
    ),
    Row(
        "operation ID annotation",
        job_only(
            lambda j: j["metadata"]["annotations"].update(
                {"operator.ptah.run/operation-id": "sha256:" + "9" * 64}
            )
        ),
        {"*": LABELS_REBUILD, "envelope": "annotations are not its claim's"},
    ),
    Row(
        "extra reserved label",
        job_only(lambda j: j["metadata"]["labels"].update({"example.kubernetes.io/x": "1"})),
        {"*": LABELS_REBUILD, "envelope": "is a reserved key the claim does not fix"},
    ),
    Row(
        "undeclared label",
        job_only(lambda j: j["metadata"]["labels"].update({"extra": "1"})),
        {"*": LABELS_REBUILD, "envelope": "Pod template labels differ from the Job's"},
    ),
    Row(
        "Pod-only annotation",
        job_only(lambda j: template(j)["metadata"]["annotations"].update({"pod-only": "1"})),
        {"*": "spec is not the one its claim builds", "envelope": "Pod template annotations"},
    ),
    Row(
        "executor image",
        job_only(
            lambda j: template(j)["spec"]["initContainers"][0].update(
                image="registry.example.com/evil@sha256:" + "e" * 64
            )
        ),
        {"*": "spec is not the one its claim builds", "envelope": TEMPLATE_PIN},
    ),
    Row(
        "privileged container",
        job_only(
            lambda j: template(j)["spec"]["containers"][0]["securityContext"].update(
                privileged=True
            )
        ),
        {"*": "spec is not the one its claim builds", "envelope": TEMPLATE_PIN},
    ),
    Row(
        "service account swapped",
        job_only(lambda j: template(j)["spec"].update(serviceAccountName="admin")),
        {"*": "spec is not the one its claim builds", "envelope": TEMPLATE_PIN},
    ),
    Row(
        "controller image unpinned",
        job_only(
            lambda j: j["metadata"]["annotations"].update(
                {"operator.ptah.run/controller-image": "registry.example.com/op:latest"}
            )
        ),
        {"*": LABELS_REBUILD, "envelope": "controller image is not pinned"},
    ),
    Row(
        "snapshot missing",
        claim_only(snapshot=None),
        {"*": "the claim's admission snapshot is invalid"},
    ),
    Row(
        "malformed claim epoch",
        claim_only(epoch="v2-nope"),
        {"*": "the claim names no execution epoch"},
    ),
    Row(
        "empty operation ID",
        claim_only(operation_id=""),
        {"*": "the claim names no operation or Job"},
    ),
    Row(
        "unknown operation type",
        claim_only(operation="Vacuum"),
        {"*": "does not define"},
    ),
    Row(
        "backoff raised",
        job_only(lambda j: j["spec"].update(backoffLimit=3)),
        {"*": "spec is not the one its claim builds", "envelope": ""},
    ),
    # Values are compared with their JSON types: a bool is not an int, a float is not
    # an int, a string is not an int, even where Python's == says they are equal. The
    # spec fields outside the template are the rebuild's alone (as "backoff raised").
    Row(
        "backoffLimit false for 0",
        job_only(lambda j: j["spec"].update(backoffLimit=False)),
        {"*": "spec is not the one its claim builds", "envelope": ""},
    ),
    Row(
        "parallelism true for 1",
        job_only(lambda j: j["spec"].update(parallelism=True)),
        {"*": "spec is not the one its claim builds", "envelope": ""},
    ),
    Row(
        "activeDeadlineSeconds as a float",
        job_only(lambda j: j["spec"].update(activeDeadlineSeconds=900.0)),
        {"*": "spec is not the one its claim builds", "envelope": ""},
    ),
    Row(
        "completions as a string",
        job_only(lambda j: j["spec"].update(completions="1")),
        {"*": "spec is not the one its claim builds", "envelope": ""},
    ),
    Row(
        "runAsUser as a float",
        job_only(
            lambda j: template(j)["spec"]["securityContext"].update(
                runAsUser=float(template(j)["spec"]["securityContext"]["runAsUser"])
            )
        ),
        {"*": "spec is not the one its claim builds", "envelope": TEMPLATE_PIN},
    ),
    Row(
        "automountServiceAccountToken 0 for false",
        job_only(lambda j: template(j)["spec"].update(automountServiceAccountToken=0)),
        {"*": "spec is not the one its claim builds", "envelope": TEMPLATE_PIN},
    ),
]


def _run(world: World, mode: str, row: Row | None) -> str:
    job, claim = world.job(mode), world.claim(mode)
    if row is not None:
        job, claim = row.change(job, claim)
    verdict = match(job, claim)
    return "match" if verdict else verdict.reason


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("world", WORLDS)
def test_the_exact_job_matches_so_the_rows_below_prove_something(world: str, mode: str) -> None:
    assert _run(WORLDS[world](), mode, None) == "match"


@pytest.mark.parametrize("row", ROWS, ids=[r.name for r in ROWS])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("world", WORLDS)
def test_each_single_change_is_refused_with_its_sentence(world: str, mode: str, row: Row) -> None:
    expected = row.expected(mode)
    if not expected:
        # A spec field outside the template is not something the claim fixes once its
        # inputs may have moved; only the rebuild can hold it. Prove that explicitly.
        assert _run(WORLDS[world](), mode, row) == "match"
        return
    reason = _run(WORLDS[world](), mode, row)
    assert expected in reason, f"{row.name}: {reason!r}"


def test_only_a_stored_job_may_carry_the_cleanup_ttl() -> None:
    world = schema_world()
    stored = world.stored
    stored["spec"]["ttlSecondsAfterFinished"] = CLEANUP_TTL_SECONDS
    assert match(stored, world.claim("rebuild-stored"))
    stored["spec"]["ttlSecondsAfterFinished"] = CLEANUP_TTL_SECONDS + 1
    assert "spec is not" in match(stored, world.claim("rebuild-stored")).reason
    submitted = world.submitted
    submitted["spec"]["ttlSecondsAfterFinished"] = CLEANUP_TTL_SECONDS
    assert "spec is not" in match(submitted, world.claim("rebuild-submitted")).reason


def test_a_submitted_job_carries_no_metadata_its_claim_did_not_build() -> None:
    world = schema_world()
    submitted = world.submitted
    submitted["metadata"]["finalizers"] = ["foregroundDeletion"]
    assert (
        "metadata is not the metadata" in match(submitted, world.claim("rebuild-submitted")).reason
    )
    stored = world.stored
    stored["metadata"]["finalizers"] = ["foregroundDeletion"]
    assert match(stored, world.claim("rebuild-stored"))


def test_a_spec_is_compared_by_what_it_means() -> None:
    world = schema_world()
    stored = world.stored
    resources = stored["spec"]["template"]["spec"]["containers"][0]["resources"]
    resources["requests"]["cpu"] = "0.1"
    resources["limits"]["memory"] = "268435456"
    assert match(stored, world.claim("rebuild-stored"))
    resources["limits"]["memory"] = "257Mi"
    assert "spec is not" in match(stored, world.claim("rebuild-stored")).reason
    empty_selector = world.stored
    empty_selector["spec"]["template"]["spec"]["nodeSelector"] = {}
    assert "spec is not" in match(empty_selector, world.claim("rebuild-stored")).reason


def test_a_retired_claim_without_a_binding_still_matches_its_own_job() -> None:
    world = schema_world("Plan")
    claim = world.claim("envelope", binding=None)
    assert match(world.stored, claim)


def test_an_apply_claim_without_its_plan_matches_nothing() -> None:
    world = schema_world("Apply")
    claim = world.claim("envelope", plan=None)
    assert "reserved key the claim does not fix" in match(world.stored, claim).reason


def test_a_missing_job_is_refused() -> None:
    world = schema_world()
    assert "no API-assigned identity" in match(None, world.claim("envelope")).reason


def test_an_empty_rebuild_is_a_rebuild_that_matches_nothing() -> None:
    # A caller that rebuilt nothing must not be judged in the weaker envelope mode.
    world = schema_world("Apply")
    assert match(world.stored, world.claim("envelope"))
    verdict = match(world.stored, world.claim("envelope", built={}))
    assert "labels or annotations are not the ones its claim builds" in verdict.reason
