"""Atomic files, the bundle stores, and the small text helpers the CLI relies on."""

from __future__ import annotations

import json
import stat
from datetime import timedelta
from pathlib import Path

import pytest
from certs_support import material
from hypothesis import given
from hypothesis import strategies as st

from certs import (
    CertificateError,
    FileBundles,
    InMemoryBundles,
    RotationError,
    WebhookBundles,
    atomic_write,
)
from certs._describe import format_duration, parse_duration


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize(
    ("name", "mode"),
    [
        ("ca.key", 0o600),
        ("tls.key", 0o600),
        ("rotation.json", 0o600),
        ("ca.crt", 0o644),
        ("tls.crt", 0o644),
    ],
)
def test_atomic_write_sets_the_mode_by_file(tmp_path: Path, name: str, mode: int) -> None:
    atomic_write(tmp_path / name, b"first")
    atomic_write(tmp_path / name, b"second")
    assert (tmp_path / name).read_bytes() == b"second"
    assert _mode(tmp_path / name) == mode
    assert [p.name for p in tmp_path.iterdir()] == [name]  # no temporary files left


def test_a_failed_write_leaves_the_old_file_and_no_debris(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "tls.key"
    atomic_write(target, b"old")

    def refuse(self: Path, other: Path) -> Path:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Path, "replace", refuse)
    with pytest.raises(OSError, match="No space"):
        atomic_write(target, b"new")
    monkeypatch.undo()
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["tls.key"]


def test_in_memory_bundles_never_touch_unmanaged() -> None:
    bundles = InMemoryBundles({"ours": b""}, {"theirs": b"keep"})
    assert isinstance(bundles, WebhookBundles)
    assert bundles.read() == {"ours": b""}
    bundles.write("ours", b"pem")
    with pytest.raises(RotationError, match="unmanaged configuration theirs"):
        bundles.write("theirs", b"pem")
    assert bundles.unmanaged == {"theirs": b"keep"}
    assert bundles.writes == [("ours", b"pem")]


def test_file_bundles_manage_only_the_named_entries(tmp_path: Path) -> None:
    path = tmp_path / "bundles.json"
    path.write_text(json.dumps({"ours": "old", "theirs": "keep"}))
    bundles = FileBundles(path, ["ours", "new-one"])
    assert isinstance(bundles, WebhookBundles)
    assert bundles.read() == {"ours": b"old", "new-one": b""}
    pem = material().new_ca.cert_pem()
    bundles.write("new-one", pem)
    with pytest.raises(RotationError, match="unmanaged configuration theirs"):
        bundles.write("theirs", pem)
    stored = json.loads(path.read_text())
    assert stored == {"ours": "old", "theirs": "keep", "new-one": pem.decode()}


def test_file_bundles_default_to_every_entry(tmp_path: Path) -> None:
    path = tmp_path / "bundles.json"
    path.write_text(json.dumps({"a": "1", "b": "2"}))
    assert FileBundles(path).read() == {"a": b"1", "b": b"2"}
    assert FileBundles(tmp_path / "absent.json").read() == {}


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "is not valid JSON"),
        ("[1, 2]", "must be a JSON object of name to PEM text"),
        ('{"a": 1}', "must be a JSON object of name to PEM text"),
    ],
)
def test_a_bad_bundles_file_is_a_clear_error(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bundles.json"
    path.write_text(content)
    with pytest.raises(CertificateError, match=message):
        FileBundles(path).read()


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("2160h", 2160 * 3600), ("1h30m", 5400), ("90s", 90), ("0s", 0), ("1h1m1s", 3661)],
)
def test_durations_parse(text: str, seconds: int) -> None:
    assert parse_duration(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize("text", ["", "5", "5x", "h", "1.5h", "-1h", "1h ", "1d"])
def test_bad_durations_say_how_to_write_one(text: str) -> None:
    with pytest.raises(CertificateError, match="is not a duration; write hours"):
        parse_duration(text)


@given(st.integers(min_value=0, max_value=10**7))
def test_durations_round_trip_through_seconds(seconds: int) -> None:
    assert parse_duration(f"{seconds}s") == timedelta(seconds=seconds)


@pytest.mark.parametrize(
    ("span", "text"),
    [
        (timedelta(days=1094, hours=23, minutes=59), "1094d 23h"),
        (timedelta(hours=5, minutes=3, seconds=9), "5h 3m"),
        (timedelta(minutes=2), "2m 0s"),
        (timedelta(seconds=42), "42s"),
        (timedelta(seconds=-90), "-1m 30s"),
    ],
)
def test_durations_format_coarsely(span: timedelta, text: str) -> None:
    assert format_duration(span) == text
