"""Rotation end to end: a directory, managed bundles and a lagging server on a fake clock.

After every single step the server's certificate must verify against every
managed bundle (`World.check`); crashes are injected right after each durable write.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from certs_support import DNS_NAMES
from rotation_world import InvariantViolation, World, make_world

import certs._rotator
from certs import (
    CA_CERT,
    STATE_FILE,
    TLS_CERT,
    BeginRotation,
    ClearRecord,
    Converged,
    Force,
    PublishBundle,
    RotationError,
    RotationPolicy,
    RotationRecord,
    Rotator,
    StateFileError,
    Wait,
    WriteFile,
    WriteRecord,
    bundle_fingerprints,
    fingerprint,
    generate_ca,
    is_issued_by,
    issue_serving_certificate,
    load_certificate,
    read_directory,
    subject_alt_names,
)
from certs._files import atomic_write as real_atomic_write
from certs._files import remove_durably as real_remove_durably


@pytest.fixture
def world(tmp_path: Path) -> World:
    return make_world(tmp_path)


def _kinds(steps: list[object]) -> list[str]:
    return [type(step).__name__ for step in steps]


def _assert_rotated_to(world: World, new_ca_pem: bytes | None = None) -> None:
    files = read_directory(world.directory)
    ca = load_certificate(files.ca_cert)
    leaf = load_certificate(files.tls_cert)
    assert is_issued_by(leaf, ca)
    if new_ca_pem is not None:
        assert files.ca_cert == new_ca_pem
    for name, bundle in world.bundles.read().items():
        assert bundle_fingerprints(bundle) == {fingerprint(ca)}, name
    assert not (world.directory / STATE_FILE).exists()
    assert world.bundles.unmanaged == world.unmanaged_before
    assert isinstance(world.rotator().plan(), Converged)


def test_ca_rotation_publishes_swaps_then_drops(world: World) -> None:
    old_ca = read_directory(world.directory).ca_cert
    old_serial = world.server.served.certificate.serial_number
    steps = world.drive(world.rotator(), Force.CA)
    assert _kinds(steps) == [
        "BeginRotation",
        "PublishBundle",
        "PublishBundle",
        "WriteRecord",
        "Wait",
        "WriteFile",
        "WriteFile",
        "WriteFile",
        "WriteFile",
        "WriteRecord",
        "Wait",
        "PublishBundle",
        "PublishBundle",
        "ClearRecord",
    ]
    publishes = [s for s in steps if isinstance(s, PublishBundle)]
    assert [len(bundle_fingerprints(s.bundle)) for s in publishes] == [2, 2, 1, 1]
    assert read_directory(world.directory).ca_cert != old_ca
    assert world.server.served.certificate.serial_number != old_serial
    _assert_rotated_to(world)


def test_serving_only_rotation_leaves_bundles_alone(world: World) -> None:
    before = read_directory(world.directory)
    steps = world.drive(world.rotator(), Force.SERVING)
    assert _kinds(steps) == ["BeginRotation", "WriteFile", "WriteFile", "ClearRecord"]
    assert world.bundles.writes == []
    after = read_directory(world.directory)
    assert (after.ca_cert, after.ca_key) == (before.ca_cert, before.ca_key)
    assert after.tls_cert != before.tls_cert
    # The new leaf keeps the names the old one served.
    assert subject_alt_names(load_certificate(after.tls_cert))[0] == list(DNS_NAMES)
    _assert_rotated_to(world)


class Crash(BaseException):
    """A process dying; BaseException so no `except Exception` in the code swallows it."""


@pytest.fixture
def crash_after(monkeypatch: pytest.MonkeyPatch, world: World) -> Iterator[Callable[[int], None]]:
    """Arm a crash right after the n-th durable write (file, state file or bundle)."""
    armed = {"left": -1}

    def counted(write: Callable[..., None]) -> Callable[..., None]:
        def wrapper(*args: object, **kwargs: object) -> None:
            write(*args, **kwargs)
            armed["left"] -= 1
            if armed["left"] == 0:
                raise Crash

        return wrapper

    monkeypatch.setattr(certs._rotator, "atomic_write", counted(real_atomic_write))
    monkeypatch.setattr(certs._rotator, "remove_durably", counted(real_remove_durably))
    monkeypatch.setattr(world.bundles, "write", counted(world.bundles.write))

    def arm(n: int) -> None:
        armed["left"] = n

    yield arm


# A CA rotation over two managed bundles makes 12 durable writes:
# record, 2 overlap bundles, record, 4 files, record, 2 new-only bundles, clear.
CA_ROTATION_WRITES = 12


@pytest.mark.parametrize("crash_at", range(1, CA_ROTATION_WRITES + 1))
def test_ca_rotation_converges_after_a_crash_at_every_write(
    world: World, crash_after: Callable[[int], None], crash_at: int
) -> None:
    crash_after(crash_at)
    with pytest.raises(Crash):
        world.drive(world.rotator(), Force.CA)
    world.check()  # what the crash left behind is safe as it stands
    state = (world.directory / STATE_FILE).read_bytes() if crash_at < CA_ROTATION_WRITES else b""
    crash_after(-1)
    world.drive(world.rotator())  # a new process, no force: it must finish, not restart
    recorded = RotationRecord.from_json(state).new_ca if state else None
    _assert_rotated_to(world, recorded)


def test_the_crash_points_cover_the_whole_rotation(
    world: World, crash_after: Callable[[int], None]
) -> None:
    # Guards the parametrisation above: one write more than counted never happens.
    crash_after(CA_ROTATION_WRITES + 1)
    world.drive(world.rotator(), Force.CA)
    crash_after(CA_ROTATION_WRITES)
    with pytest.raises(Crash):
        world.drive(world.rotator(), Force.CA)


@pytest.mark.parametrize("crash_at", range(1, 5))
def test_serving_rotation_converges_after_a_crash_at_every_write(
    world: World, crash_after: Callable[[int], None], crash_at: int
) -> None:
    crash_after(crash_at)
    with pytest.raises(Crash):
        world.drive(world.rotator(), Force.SERVING)
    world.check()
    crash_after(-1)
    world.drive(world.rotator())
    _assert_rotated_to(world)
    assert world.bundles.writes == []


def test_a_rerun_installs_the_recorded_ca_rather_than_minting_another(world: World) -> None:
    rotator = world.rotator()
    assert isinstance(rotator.advance(Force.CA), BeginRotation)
    recorded = RotationRecord.from_json((world.directory / STATE_FILE).read_bytes())
    world.drive(world.rotator())
    assert read_directory(world.directory).ca_cert == recorded.new_ca
    assert read_directory(world.directory).tls_cert == recorded.new_leaf


def test_without_settle_or_probe_the_old_ca_is_dropped_too_early(tmp_path: Path) -> None:
    # Why `settle` and the probe exist: a server that has not reloaded yet still
    # presents the old leaf; dropping the old CA at once leaves it untrusted.
    world = make_world(tmp_path)
    hasty = RotationPolicy(settle=timedelta(0))
    with pytest.raises(InvariantViolation, match="is not trusted"):
        world.drive(world.rotator(policy=hasty), Force.CA)


def test_a_probe_holds_the_drop_until_the_server_presents_the_new_leaf(tmp_path: Path) -> None:
    world = make_world(tmp_path, server_follows_clock=False)
    policy = RotationPolicy(settle=timedelta(0))

    def probe() -> str:
        return fingerprint(world.server.served.certificate)

    rotator = world.rotator(policy=policy, probe=probe)
    steps = []
    for _ in range(30):
        step = rotator.advance(Force.CA if not steps else None)
        steps.append(step)
        world.check()
        if isinstance(step, Wait) and "still presents" in step.reason:
            break
    else:
        pytest.fail("the rotation never waited for the server")
    # However long we wait, the old CA stays while the old leaf is served...
    for _ in range(3):
        assert isinstance(rotator.advance(), Wait)
        world.check()
    # ...and goes once the server has reloaded.
    world.server.reload()
    world.drive(rotator)
    _assert_rotated_to(world)


def test_a_bundle_reverted_during_the_swap_is_published_again(world: World) -> None:
    rotator = world.rotator()
    while not (isinstance(step := rotator.advance(Force.CA), WriteRecord)):
        pass
    assert step.record.phase == "swap"
    old_ca = step.record.old_ca
    world.bundles.write("ptah-validate", old_ca)  # a chart upgrade puts the old bundle back
    steps = world.drive(world.rotator())
    assert isinstance(steps[0], WriteRecord)
    assert steps[0].record.phase == "publish"
    assert isinstance(steps[1], PublishBundle)
    assert steps[1].name == "ptah-validate"
    _assert_rotated_to(world)


def test_a_configuration_added_mid_rotation_gets_the_overlap(tmp_path: Path) -> None:
    world = make_world(tmp_path, managed=("first",))
    rotator = world.rotator()
    while not isinstance(step := rotator.advance(Force.CA), WriteRecord):
        pass
    # A second managed configuration appears, installed with the CA of the day.
    world.bundles._managed["second"] = step.record.old_ca
    steps = world.drive(world.rotator())
    second = [s for s in steps if isinstance(s, PublishBundle) and s.name == "second"]
    assert [len(bundle_fingerprints(s.bundle)) for s in second] == [2, 1]
    _assert_rotated_to(world)


def test_idle_repairs_a_bundle_that_lost_the_ca(world: World) -> None:
    world.bundles._managed["ptah-validate"] = b""
    step = world.rotator().plan()
    assert isinstance(step, PublishBundle)
    assert step.name == "ptah-validate"
    world.drive(world.rotator())
    _assert_rotated_to(world)


@pytest.mark.parametrize(
    ("age", "expected", "replaces_ca"),
    [
        (timedelta(0), Converged, None),
        (timedelta(hours=2160 - 721), Converged, None),
        (timedelta(hours=2160 - 720), BeginRotation, False),
        (timedelta(hours=2200), BeginRotation, False),
        (timedelta(hours=26280 - 4381), BeginRotation, False),
        (timedelta(hours=26280 - 4380), BeginRotation, True),
        (timedelta(hours=30000), BeginRotation, True),
    ],
)
def test_what_is_due_at_each_age(
    world: World, age: timedelta, expected: type, replaces_ca: bool | None
) -> None:
    world.clock.advance(age)
    step = world.rotator().plan()
    assert isinstance(step, expected)
    if isinstance(step, BeginRotation):
        assert step.replace_ca is replaces_ca


def test_a_key_that_does_not_match_is_reissued(world: World) -> None:
    other = generate_ca(now=world.clock.now())
    real_atomic_write(world.directory / "tls.key", other.key_pem())
    step = world.rotator().plan()
    assert isinstance(step, BeginRotation)
    assert step.reason == "tls.key does not match tls.crt"


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        ("no-ca", "no ca.crt or no tls.crt"),
        ("foreign-leaf", "tls.crt is not signed by ca.crt"),
        ("bad-state", "not a valid rotation record"),
    ],
)
def test_states_we_never_produce_are_refused(world: World, damage: str, message: str) -> None:
    if damage == "no-ca":
        (world.directory / CA_CERT).unlink()
    elif damage == "foreign-leaf":
        stranger = generate_ca(now=world.clock.now())
        leaf = issue_serving_certificate(stranger, dns_names=DNS_NAMES, now=world.clock.now())
        real_atomic_write(world.directory / TLS_CERT, leaf.cert_pem())
    else:
        real_atomic_write(world.directory / STATE_FILE, b"{not json")
    with pytest.raises((RotationError, StateFileError), match=message):
        world.rotator().plan()
    assert world.bundles.writes == []


def test_run_consumes_force_once_and_stops_at_its_deadline(world: World) -> None:
    rotator = world.rotator()
    result = rotator.run(Force.CA, deadline=world.clock.now())
    assert not result.completed
    assert result.waiting is not None
    assert "overlap" in result.waiting.reason
    finished = Rotator(world.directory, world.bundles, clock=world.clock).run()
    assert finished.completed
    assert isinstance(finished.steps[-1], ClearRecord)
    assert any(isinstance(s, WriteFile) for s in finished.steps)
    _assert_rotated_to(world)


def test_a_bundle_store_that_drops_writes_is_reported(world: World) -> None:
    world.bundles.write = lambda name, bundle: None  # type: ignore[method-assign]
    with pytest.raises(RotationError, match="did not settle"):
        world.rotator().run(Force.CA)
