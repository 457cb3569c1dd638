"""Properties of the pure decision core, driven by an in-memory model of the world.

The central one is inductive: from *any* mid-rotation state in which the served
certificate is trusted by every managed bundle, whatever the server's reload
timing, every step keeps it so — and the rotation finishes.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from datetime import datetime, timedelta

import pytest
from certs_support import DNS_NAMES, T0, material
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from rotation_world import InvariantViolation, check_trust

from certs import (
    CA_CERT,
    CA_KEY,
    TLS_CERT,
    TLS_KEY,
    BeginRotation,
    CertificateError,
    CertifiedKey,
    ClearRecord,
    Converged,
    DirectoryContents,
    Observation,
    Phase,
    PublishBundle,
    RotationPolicy,
    RotationRecord,
    StateFileError,
    Wait,
    WriteFile,
    WriteRecord,
    bundle_fingerprints,
    decide,
    fingerprint,
    generate_ca,
    issue_serving_certificate,
)
from tests.support.examples import examples

POLICY = RotationPolicy()
FILE_ORDER = (CA_KEY, CA_CERT, TLS_KEY, TLS_CERT)


@dataclass
class Model:
    files: dict[str, bytes]
    record: RotationRecord | None
    bundles: dict[str, bytes]
    served: CertifiedKey
    now: datetime

    def observation(self, probe: bool) -> Observation:
        return Observation(
            files=DirectoryContents(
                ca_cert=self.files[CA_CERT],
                ca_key=self.files[CA_KEY],
                tls_cert=self.files[TLS_CERT],
                tls_key=self.files[TLS_KEY],
            ),
            record=self.record,
            bundles=dict(self.bundles),
            served_fingerprint=fingerprint(self.served.certificate) if probe else None,
        )

    def reload(self) -> None:
        # A torn or mismatched pair is refused and the old one kept, as ReloadingTLS does.
        with contextlib.suppress(CertificateError):
            self.served = CertifiedKey.from_pem(self.files[TLS_CERT], self.files[TLS_KEY])

    def check(self) -> None:
        check_trust(self.served.certificate, self.bundles, self.now)


def _record(phase: Phase, settle_until: datetime) -> RotationRecord:
    m = material()
    return RotationRecord(
        phase=phase,
        old_ca=m.old_ca.cert_pem(),
        new_ca=m.new_ca.cert_pem(),
        new_ca_key=m.new_ca.key_pem(),
        new_leaf=m.new_leaf.cert_pem(),
        new_leaf_key=m.new_leaf.key_pem(),
        settle_until=settle_until,
    )


def _bundle(kind: str) -> bytes:
    m = material()
    return {
        "old": m.old_ca.cert_pem(),
        "new": m.new_ca.cert_pem(),
        "overlap": m.old_ca.cert_pem() + m.new_ca.cert_pem(),
        "reversed": m.new_ca.cert_pem() + m.old_ca.cert_pem(),
    }[kind]


@st.composite
def mid_rotation(draw: st.DrawFn) -> Model:
    m = material()
    phase = draw(st.sampled_from(list(Phase)))
    now = T0 + timedelta(minutes=draw(st.integers(0, 600)))
    settle_until = now + timedelta(seconds=draw(st.integers(-300, 300)))
    record = _record(phase, settle_until)
    written = draw(st.integers(0, 4))  # how many of the swap's files reached the disk
    old = {CA_KEY: m.old_ca.key_pem(), CA_CERT: m.old_ca.cert_pem()}
    old |= {TLS_KEY: m.old_leaf.key_pem(), TLS_CERT: m.old_leaf.cert_pem()}
    files = {n: (record.files()[n] if i < written else old[n]) for i, n in enumerate(FILE_ORDER)}
    names = draw(st.lists(st.sampled_from(["a", "b", "c"]), min_size=0, max_size=3, unique=True))
    kinds = st.sampled_from(["old", "new", "overlap", "reversed"])
    bundles = {name: _bundle(draw(kinds)) for name in names}
    # The server is up to date with the last complete pair on disk: an initial
    # state that already broke the settle assumption proves nothing.
    served = m.new_leaf if written == 4 else m.old_leaf
    return Model(files, record, bundles, served, now)


@given(model=mid_rotation(), probe=st.booleans(), data=st.data())
@settings(max_examples=examples(300), suppress_health_check=[HealthCheck.too_slow], deadline=None)
def test_trust_is_kept_from_any_safe_state_and_the_rotation_finishes(
    model: Model, probe: bool, data: st.DataObject
) -> None:
    try:
        model.check()
    except InvariantViolation:
        assume(False)
    for _ in range(40):
        step = decide(model.observation(probe), now=model.now, policy=POLICY)
        if isinstance(step, Converged):
            break
        assert not isinstance(step, BeginRotation), "a finished rotation must not start another"
        if isinstance(step, PublishBundle):
            assert step.name in model.bundles, "only managed configurations are written"
            model.bundles[step.name] = step.bundle
        elif isinstance(step, WriteFile):
            model.files[step.name] = step.data
        elif isinstance(step, WriteRecord):
            model.record = step.record
        elif isinstance(step, ClearRecord):
            model.record = None
        elif isinstance(step, Wait):
            assert step.until > model.now, "a wait must move time forward"
            model.now = max(model.now, step.until)
            model.reload()  # the assumption `settle` and the probe encode: time lets it catch up
        # The server may also pick the files up at any other moment.
        if data.draw(st.booleans(), label="server reloads now"):
            model.reload()
        model.check()
    else:
        pytest.fail("the rotation did not finish in 40 steps")
    new = fingerprint(material().new_ca.certificate)
    assert model.record is None
    assert all(bundle_fingerprints(b) == {new} for b in model.bundles.values())
    assert model.files == {n: _record(Phase.SWAP, T0).files()[n] for n in FILE_ORDER}


hours = st.integers(min_value=1, max_value=20000).map(lambda h: timedelta(hours=h))


@st.composite
def valid_policies(draw: st.DrawFn) -> RotationPolicy:
    """Every policy `RotationPolicy` accepts, built from its rules rather than filtered."""
    serving_renew_before = draw(hours)
    ca_renew_before = serving_renew_before + draw(hours) - timedelta(hours=1)
    return RotationPolicy(
        serving_renew_before=serving_renew_before,
        serving_validity=serving_renew_before + draw(hours),
        ca_renew_before=ca_renew_before,
        ca_validity=ca_renew_before + draw(hours),
    )


@given(policy=valid_policies(), ca_age=st.floats(min_value=0, max_value=1))
@settings(max_examples=examples(60), deadline=None)
def test_a_freshly_issued_leaf_is_never_due_under_a_valid_policy(
    policy: RotationPolicy, ca_age: float
) -> None:
    # Otherwise every run would reissue the leaf: a rotation loop. Only the CA,
    # when it is itself due, may start a rotation.
    ca = generate_ca(now=T0 - policy.ca_validity * ca_age, validity=policy.ca_validity)
    leaf = issue_serving_certificate(
        ca, dns_names=DNS_NAMES, now=T0, validity=policy.serving_validity
    )
    observation = Observation(
        files=DirectoryContents(ca.cert_pem(), ca.key_pem(), leaf.cert_pem(), leaf.key_pem()),
        record=None,
        bundles={"a": ca.cert_pem()},
    )
    step = decide(observation, now=T0, policy=policy)
    assert isinstance(step, Converged) or (isinstance(step, BeginRotation) and step.replace_ca)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"ca_renew_before": timedelta(hours=26280)}, "CA renewal window"),
        ({"serving_renew_before": timedelta(hours=2160)}, "serving renewal window must be shorter"),
        (
            {"serving_renew_before": timedelta(hours=100), "ca_renew_before": timedelta(hours=99)},
            "must not be longer than the CA renewal window",
        ),
        ({"settle": timedelta(seconds=-1)}, "must not be negative"),
    ],
)
def test_policies_that_would_loop_are_refused(options: dict[str, timedelta], message: str) -> None:
    with pytest.raises(CertificateError, match=message):
        RotationPolicy(**options)


@given(phase=st.sampled_from(list(Phase)), offset=st.integers(-(10**6), 10**6))
@settings(max_examples=examples(30), deadline=None)
def test_the_record_survives_a_round_trip(phase: Phase, offset: int) -> None:
    record = _record(phase, T0 + timedelta(seconds=offset))
    assert RotationRecord.from_json(record.to_json()) == record


def test_a_record_whose_leaf_is_not_from_its_ca_is_refused() -> None:
    m = material()
    record = _record(Phase.SWAP, T0)
    forged = RotationRecord(
        phase=record.phase,
        old_ca=record.old_ca,
        new_ca=record.new_ca,
        new_ca_key=record.new_ca_key,
        new_leaf=m.old_leaf.cert_pem(),
        new_leaf_key=m.old_leaf.key_pem(),
        settle_until=T0,
    )
    with pytest.raises(StateFileError, match="not signed by its new CA"):
        RotationRecord.from_json(forged.to_json())
