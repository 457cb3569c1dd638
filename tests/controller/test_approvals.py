"""Approvals: the oldest usable one authorizes, consumed ones never again, and spending
is one idempotent status patch under a resourceVersion precondition."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.pieces.approvals import (
    CONSUMED,
    DISPATCH_COMMITTED,
    ApprovalGone,
    choose_schema_approval,
    consume_approval,
    find_migration_approval,
    find_schema_approval,
    held_migration_approval,
    held_schema_approval,
    note_skipped,
    skipped_migration_approvals,
    skipped_schema_approvals,
)
from jobclaim.api import ObjectReference, PtahMigration, PtahSchema
from jobclaim.apiserver import CAS_ATTEMPTS as MAX_ATTEMPTS
from jobclaim.apiserver import (
    PTAHMIGRATIONAPPROVALS,
    PTAHSCHEMAAPPROVALS,
    Conflict,
    Object,
    Unavailable,
)
from kube.fake.inmemory import InMemoryApi, matching
from tests.support.claimworld import EPOCH, example, plan_for

NS = "shop"
CLAIM = "claim-1"
NOW = "2026-12-02T12:30:00Z"
SCHEMA_UID = "schema-uid-1"
PLAN = plan_for(SCHEMA_UID)
MIGRATION_UID = "migration-uid-1"
MPLAN = ObjectReference(name="ptah-mplan-" + "f" * 24, uid="mplan-uid")
MPLAN_FINGERPRINT = "sha256:" + "f" * 64


def schema() -> PtahSchema:
    raw = example("ptahschema.yaml")
    raw["metadata"].update(uid=SCHEMA_UID, generation=1, resourceVersion="10")
    return PtahSchema.model_validate(raw)


def migration() -> PtahMigration:
    raw = example("ptahmigration.yaml")
    raw["metadata"].update(uid=MIGRATION_UID, generation=1, resourceVersion="10", namespace=NS)
    return PtahMigration.model_validate(raw)


class Clock:
    def __init__(self) -> None:
        self.moment = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.moment


def stamped() -> dict[str, Any]:
    return {
        "approver": {"username": "alice", "uid": "u-alice", "groups": ["dba"]},
        "approvedAt": "2026-12-02T12:00:00Z",
        "mutationRequestUID": "req-1",
    }


def schema_approval(name: str = "approve-1", **spec: Any) -> Object:
    body: dict[str, Any] = {
        "schemaRef": {"name": "orders", "uid": SCHEMA_UID},
        "planRef": {"name": PLAN.name, "uid": PLAN.uid},
        "planFingerprint": PLAN.fingerprint,
        **stamped(),
    }
    body.update(spec)
    return {"metadata": {"name": name}, "spec": {k: v for k, v in body.items() if v is not None}}


def migration_approval(name: str = "approve-1", **spec: Any) -> Object:
    body: dict[str, Any] = {
        "migrationRef": {"name": "billing", "uid": MIGRATION_UID},
        "planRef": MPLAN.to_wire(),
        "planFingerprint": MPLAN_FINGERPRINT,
        **stamped(),
    }
    body.update(spec)
    return {"metadata": {"name": name}, "spec": {k: v for k, v in body.items() if v is not None}}


def condition(api: InMemoryApi, kind: str, status: str, name: str = "approve-1") -> None:
    resource = PTAHSCHEMAAPPROVALS
    current = api.get(resource, NS, name)
    conditions = [*(current.get("status") or {}).get("conditions", [])]
    conditions.append({"type": kind, "status": status, "reason": "Set"})
    api.patch_status(
        resource,
        NS,
        name,
        {"conditions": conditions},
        resource_version=current["metadata"]["resourceVersion"],
    )


def deleting(api: InMemoryApi, name: str = "approve-1") -> None:
    api.patch_metadata(PTAHSCHEMAAPPROVALS, NS, name, {"finalizers": ["test/hold"]})
    api.delete(PTAHSCHEMAAPPROVALS, NS, name)


Arrange = Callable[[InMemoryApi], object]


def stored(obj: Object) -> Arrange:
    return lambda api: api.create(PTAHSCHEMAAPPROVALS, NS, obj)


def then(*steps: Arrange) -> Arrange:
    def run(api: InMemoryApi) -> None:
        for step in steps:
            step(api)

    return run


# (id, what the namespace holds, whether the approval authorizes the plan)
SCHEMA_ROWS: list[tuple[str, Arrange, bool]] = [
    # Control row: a stamped approval of exactly this plan authorizes it.
    ("matches", stored(schema_approval()), True),
    ("names-the-epoch", stored(schema_approval(executionBindingID=EPOCH)), True),
    ("not-stale", then(stored(schema_approval()), lambda a: condition(a, "Stale", "False")), True),
    ("accepted", then(stored(schema_approval()), lambda a: condition(a, "Accepted", "True")), True),
    ("nothing", lambda api: None, False),
    ("other-schema-uid", stored(schema_approval(schemaRef={"name": "orders", "uid": "x"})), False),
    ("other-schema-name", stored(schema_approval(schemaRef={"name": "x", "uid": SCHEMA_UID})),
     False),
    ("other-plan-uid", stored(schema_approval(planRef={"name": PLAN.name, "uid": "x"})), False),
    ("other-plan-name", stored(schema_approval(planRef={"name": "x", "uid": PLAN.uid})), False),
    ("other-fingerprint", stored(schema_approval(planFingerprint="sha256:" + "0" * 64)), False),
    ("other-epoch", stored(schema_approval(executionBindingID="v1-" + "9" * 32)), False),
    ("no-approver", stored(schema_approval(approver=None)), False),
    ("no-approved-at", stored(schema_approval(approvedAt=None)), False),
    ("no-request-uid", stored(schema_approval(mutationRequestUID=None)), False),
    ("empty-request-uid", stored(schema_approval(mutationRequestUID="")), False),
    # The stamp's time is held to the creationTimestamp the API server wrote (12:00).
    ("stamped-a-minute-early", stored(schema_approval(approvedAt="2026-12-02T11:59:00Z")), True),
    ("stamp-copied-from-before", stored(schema_approval(approvedAt="2026-12-02T11:00:00Z")),
     False),
    ("stamp-from-after-creation", stored(schema_approval(approvedAt="2026-12-02T12:05:00Z")),
     False),
    ("consumed", then(stored(schema_approval()), lambda a: condition(a, CONSUMED, "True")), False),
    ("stale", then(stored(schema_approval()), lambda a: condition(a, "Stale", "True")), False),
    ("deleting", then(stored(schema_approval()), deleting), False),
    ("unreadable", stored({**schema_approval(), "extra": {"field": 1}}), False),
]  # fmt: skip


@pytest.mark.parametrize(
    ("arrange", "authorizes"), [r[1:] for r in SCHEMA_ROWS], ids=[r[0] for r in SCHEMA_ROWS]
)
def test_only_an_exact_stamped_unspent_approval_authorizes_a_schema_plan(
    arrange: Arrange, authorizes: bool
) -> None:
    api = InMemoryApi(clock=Clock())
    arrange(api)
    found = find_schema_approval(api, schema(), PLAN)
    assert (found is not None) is authorizes
    if found is not None:
        assert found.metadata.name == "approve-1"


def test_the_oldest_usable_approval_wins_then_the_first_by_name() -> None:
    clock = Clock()
    api = InMemoryApi(clock=clock)
    api.create(PTAHSCHEMAAPPROVALS, NS, schema_approval("zz-oldest"))
    clock.moment += timedelta(minutes=1)
    api.create(PTAHSCHEMAAPPROVALS, NS, schema_approval("bb-same-time"))
    api.create(PTAHSCHEMAAPPROVALS, NS, schema_approval("aa-same-time"))
    found = find_schema_approval(api, schema(), PLAN)
    assert found is not None and found.metadata.name == "zz-oldest"
    condition(api, CONSUMED, "True", name="zz-oldest")
    found = find_schema_approval(api, schema(), PLAN)
    assert found is not None and found.metadata.name == "aa-same-time"


def test_a_consumed_approval_never_authorizes_a_second_dispatch() -> None:
    api = InMemoryApi(clock=Clock())
    api.create(PTAHSCHEMAAPPROVALS, NS, schema_approval())
    first = find_schema_approval(api, schema(), PLAN)
    assert first is not None
    consume_approval(
        api, PTAHSCHEMAAPPROVALS, NS, "approve-1", first.metadata.uid or "", now=NOW, claim=CLAIM
    )
    assert find_schema_approval(api, schema(), PLAN) is None
    # The claim that spent it still holds it by reference, and may dispatch under it.
    ref = ObjectReference(name="approve-1", uid=first.metadata.uid or "")
    assert held_schema_approval(api, schema(), PLAN, ref) is not None


def held_arrange(api: InMemoryApi) -> ObjectReference:
    made = api.create(PTAHSCHEMAAPPROVALS, NS, schema_approval())
    return ObjectReference(name="approve-1", uid=made["metadata"]["uid"])


def replaced(api: InMemoryApi) -> None:
    api.delete(PTAHSCHEMAAPPROVALS, NS, "approve-1")
    api.create(PTAHSCHEMAAPPROVALS, NS, schema_approval())


# (id, what happens to the held approval after it was reserved, still authorizes)
HELD: list[tuple[str, Arrange, bool]] = [
    # Control row: nothing happened to it.
    ("untouched", lambda api: None, True),
    ("consumed", lambda api: condition(api, CONSUMED, "True"), True),
    ("deleted", lambda api: api.delete(PTAHSCHEMAAPPROVALS, NS, "approve-1"), False),
    ("replaced", replaced, False),
    ("stale", lambda api: condition(api, "Stale", "True"), False),
    ("deleting", deleting, False),
]


@pytest.mark.parametrize(("change", "authorizes"), [r[1:] for r in HELD], ids=[r[0] for r in HELD])
def test_a_held_approval_is_reread_by_name_and_uid(change: Arrange, authorizes: bool) -> None:
    api = InMemoryApi(clock=Clock())
    ref = held_arrange(api)
    change(api)
    assert (held_schema_approval(api, schema(), PLAN, ref) is not None) is authorizes


def test_consuming_writes_the_consumed_condition_and_keeps_the_rest() -> None:
    api = InMemoryApi(clock=Clock())
    ref = held_arrange(api)
    condition(api, "Accepted", "True")
    assert consume_approval(api, PTAHSCHEMAAPPROVALS, NS, ref.name, ref.uid, now=NOW, claim=CLAIM)
    conditions = api.get(PTAHSCHEMAAPPROVALS, NS, ref.name)["status"]["conditions"]
    assert [c["type"] for c in conditions] == ["Accepted", CONSUMED]
    consumed = conditions[1]
    assert (consumed["status"], consumed["reason"], consumed["lastTransitionTime"]) == (
        "True",
        DISPATCH_COMMITTED,
        NOW,
    )
    assert consumed["observedGeneration"] == 1


def test_consuming_is_idempotent_after_a_lost_answer() -> None:
    api = InMemoryApi(clock=Clock())
    ref = held_arrange(api)
    api.fail_after_write(matching("patch_status", PTAHSCHEMAAPPROVALS))
    with pytest.raises(Unavailable):
        consume_approval(api, PTAHSCHEMAAPPROVALS, NS, ref.name, ref.uid, now=NOW, claim=CLAIM)
    api.clear_calls()
    # The second pass wrote nothing, and says so: the spending is announced once.
    assert not consume_approval(
        api, PTAHSCHEMAAPPROVALS, NS, ref.name, ref.uid, now="2026-12-02T13:00:00Z", claim=CLAIM
    )
    assert api.writes() == []
    stamp = api.get(PTAHSCHEMAAPPROVALS, NS, ref.name)["status"]["conditions"][0]
    assert stamp["lastTransitionTime"] == NOW


# (id, what happened to the approval before it is spent, the sentence ApprovalGone says)
GONE: list[tuple[str, Arrange, str | None]] = [
    # Control row: an untouched approval is spent.
    ("untouched", lambda api: None, None),
    ("deleted", lambda api: api.delete(PTAHSCHEMAAPPROVALS, NS, "approve-1"), "no longer exists"),
    ("replaced", replaced, "replaced by another of the same name"),
    ("deleting", deleting, "is being deleted"),
    ("stale", lambda api: condition(api, "Stale", "True"), "was marked stale"),
]


@pytest.mark.parametrize(("change", "sentence"), [r[1:] for r in GONE], ids=[r[0] for r in GONE])
def test_an_approval_gone_before_it_is_spent_raises(change: Arrange, sentence: str | None) -> None:
    api = InMemoryApi(clock=Clock())
    ref = held_arrange(api)
    change(api)
    if sentence is None:
        consume_approval(api, PTAHSCHEMAAPPROVALS, NS, ref.name, ref.uid, now=NOW, claim=CLAIM)
        return
    with pytest.raises(ApprovalGone, match=sentence):
        consume_approval(api, PTAHSCHEMAAPPROVALS, NS, ref.name, ref.uid, now=NOW, claim=CLAIM)


def test_a_conflict_rereads_and_a_persistent_one_is_bounded() -> None:
    api = InMemoryApi(clock=Clock())
    ref = held_arrange(api)
    status_patch = matching("patch_status", PTAHSCHEMAAPPROVALS)
    api.fail_before_write(status_patch, Conflict("stale"), times=MAX_ATTEMPTS - 1)
    consume_approval(api, PTAHSCHEMAAPPROVALS, NS, ref.name, ref.uid, now=NOW, claim=CLAIM)
    assert find_schema_approval(api, schema(), PLAN) is None

    api = InMemoryApi(clock=Clock())
    ref = held_arrange(api)
    api.fail_before_write(status_patch, Conflict("stale"), times=None)
    with pytest.raises(Conflict):
        consume_approval(api, PTAHSCHEMAAPPROVALS, NS, ref.name, ref.uid, now=NOW, claim=CLAIM)
    assert [c.verb for c in api.calls].count("patch_status") == MAX_ATTEMPTS


def test_a_write_between_read_and_patch_is_seen_by_the_reread() -> None:
    api = InMemoryApi(clock=Clock())
    ref = held_arrange(api)
    # A staleness sweep lands between our read and our patch: the precondition fails,
    # and the re-read finds an approval that no longer authorizes anything.
    with pytest.raises(ApprovalGone, match="marked stale"):
        consume_approval(
            SweptAfterFirstRead(api),
            PTAHSCHEMAAPPROVALS,
            NS,
            ref.name,
            ref.uid,
            now=NOW,
            claim=CLAIM,
        )
    conditions = api.get(PTAHSCHEMAAPPROVALS, NS, ref.name)["status"]["conditions"]
    assert CONSUMED not in [c["type"] for c in conditions]
    assert [c.verb for c in api.calls].count("patch_status") == 2  # the sweep's, and ours


class SweptAfterFirstRead:
    """The API, with another writer marking the approval stale right after our read."""

    def __init__(self, api: InMemoryApi) -> None:
        self.api = api
        self.swept = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.api, name)

    def get(self, *args: Any) -> Object:
        found = self.api.get(*args)
        if not self.swept:
            self.swept = True
            condition(self.api, "Stale", "True")
        return found


def mstored(obj: Object) -> Arrange:
    return lambda api: api.create(PTAHMIGRATIONAPPROVALS, NS, obj)


def mcondition(kind: str) -> Arrange:
    def run(api: InMemoryApi) -> None:
        current = api.get(PTAHMIGRATIONAPPROVALS, NS, "approve-1")
        api.patch_status(
            PTAHMIGRATIONAPPROVALS,
            NS,
            "approve-1",
            {"conditions": [{"type": kind, "status": "True"}]},
            resource_version=current["metadata"]["resourceVersion"],
        )

    return run


MIGRATION_ROWS: list[tuple[str, Arrange, bool]] = [
    # Control row: a stamped approval of exactly this plan authorizes it.
    ("matches", mstored(migration_approval()), True),
    ("other-migration", mstored(migration_approval(migrationRef={"name": "billing", "uid": "x"})),
     False),
    ("other-plan-uid", mstored(migration_approval(planRef={"name": MPLAN.name, "uid": "x"})),
     False),
    ("other-fingerprint", mstored(migration_approval(planFingerprint="sha256:" + "0" * 64)),
     False),
    ("no-approver", mstored(migration_approval(approver=None)), False),
    ("consumed", then(mstored(migration_approval()), mcondition(CONSUMED)), False),
    ("stale", then(mstored(migration_approval()), mcondition("Stale")), False),
    ("a-schema-approval-is-not-one", stored(schema_approval()), False),
]  # fmt: skip


@pytest.mark.parametrize(
    ("arrange", "authorizes"), [r[1:] for r in MIGRATION_ROWS], ids=[r[0] for r in MIGRATION_ROWS]
)
def test_only_an_exact_stamped_unspent_approval_authorizes_a_migration_plan(
    arrange: Arrange, authorizes: bool
) -> None:
    api = InMemoryApi(clock=Clock())
    arrange(api)
    found = find_migration_approval(api, migration(), MPLAN, MPLAN_FINGERPRINT)
    assert (found is not None) is authorizes


def test_a_migration_approval_is_spent_once_and_held_by_reference() -> None:
    api = InMemoryApi(clock=Clock())
    made = api.create(PTAHMIGRATIONAPPROVALS, NS, migration_approval())
    ref = ObjectReference(name="approve-1", uid=made["metadata"]["uid"])
    consume_approval(api, PTAHMIGRATIONAPPROVALS, NS, ref.name, ref.uid, now=NOW, claim=CLAIM)
    assert find_migration_approval(api, migration(), MPLAN, MPLAN_FINGERPRINT) is None
    held = held_migration_approval(api, migration(), MPLAN, MPLAN_FINGERPRINT, ref)
    assert held is not None and held.metadata.uid == ref.uid
    api.delete(PTAHMIGRATIONAPPROVALS, NS, "approve-1")
    assert held_migration_approval(api, migration(), MPLAN, MPLAN_FINGERPRINT, ref) is None


# Read once: a file read per example would make the property's timing the disk's.
SCHEMA = schema()


def _listed(index: int, minute: int, consumed: bool, stale: bool) -> Object:
    obj = schema_approval(f"a-{index:02d}")
    created = f"2026-12-02T12:{minute:02d}:00Z"
    obj["metadata"].update(uid=f"uid-{index}", creationTimestamp=created)
    obj["spec"]["approvedAt"] = created
    conditions = [{"type": CONSUMED, "status": "True"}] if consumed else []
    if stale:
        conditions.append({"type": "Stale", "status": "True"})
    obj["status"] = {"conditions": conditions}
    return obj


@given(
    rows=st.lists(
        st.tuples(st.integers(0, 59), st.booleans(), st.booleans()), min_size=0, max_size=8
    )
)
def test_the_choice_is_the_oldest_unspent_one_whatever_the_listing_order(
    rows: list[tuple[int, bool, bool]],
) -> None:
    objects = [_listed(i, minute, consumed, stale) for i, (minute, consumed, stale) in
               enumerate(rows)]  # fmt: skip
    usable = [
        (minute, f"a-{i:02d}") for i, (minute, consumed, stale) in enumerate(rows)
        if not consumed and not stale
    ]  # fmt: skip
    chosen = choose_schema_approval(objects, SCHEMA, PLAN)
    reversed_chosen = choose_schema_approval(list(reversed(objects)), SCHEMA, PLAN)
    if not usable:
        assert chosen is None and reversed_chosen is None
        return
    assert chosen is not None and reversed_chosen is not None
    assert chosen.metadata.name == reversed_chosen.metadata.name == min(usable)[1]


def test_an_approval_skipped_for_its_stamp_is_named_with_why() -> None:
    api = InMemoryApi(clock=Clock())
    api.create(
        PTAHSCHEMAAPPROVALS, NS, schema_approval("copied", approvedAt="2026-12-01T00:00:00Z")
    )
    api.create(PTAHSCHEMAAPPROVALS, NS, schema_approval("unstamped", approver=None))
    api.create(
        PTAHSCHEMAAPPROVALS,
        NS,
        schema_approval("another-plan", approver=None, planFingerprint="sha256:" + "0" * 64),
    )
    objects = api.list(PTAHSCHEMAAPPROVALS, NS)
    assert find_schema_approval(api, schema(), PLAN) is None
    skipped = dict(skipped_schema_approvals(objects, schema(), PLAN))
    # An approval of another plan is not this plan's business, stamped or not.
    assert set(skipped) == {"copied", "unstamped"}
    assert "is not the time it was created" in skipped["copied"]
    assert skipped["unstamped"] == ("it carries no admission stamp (approver missing or malformed)")
    notes: list[tuple[str, str, bool]] = []

    class Recorder:
        def crossed(self, reason: str, note: str, *, warning: bool = False) -> None:
            notes.append((reason, note, warning))

    note_skipped(Recorder(), sorted(skipped.items()))
    assert [(r, w) for r, _, w in notes] == [("ApprovalUnstamped", True)] * 2
    assert notes[0][1].startswith("approval copied is skipped: its approvedAt")


def test_a_migration_approval_skipped_for_its_stamp_is_named() -> None:
    api = InMemoryApi(clock=Clock())
    api.create(PTAHMIGRATIONAPPROVALS, NS, migration_approval("bare", mutationRequestUID=None))
    objects = api.list(PTAHMIGRATIONAPPROVALS, NS)
    skipped = skipped_migration_approvals(objects, migration(), MPLAN, MPLAN_FINGERPRINT)
    assert skipped == [
        ("bare", "it carries no admission stamp (mutationRequestUID missing or malformed)")
    ]
