"""One lab cluster per machine: a second is refused at once, or after the wait asked for."""

from __future__ import annotations

import fcntl
from pathlib import Path

import pytest

from lab.cluster import cluster as cluster_module
from lab.cluster.cluster import ClusterStartError, LocalCluster, _Turns


@pytest.fixture
def lock_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "ptah-lab.lock"
    monkeypatch.setattr(cluster_module, "LOCK_PATH", path)
    return path


def test_a_free_lock_is_taken_and_given_back(lock_path: Path, tmp_path: Path) -> None:
    lab = LocalCluster(tmp_path / "lab")
    lab._take_lock()
    lab._release_lock()
    lab._take_lock()  # given back: taken again
    lab._release_lock()


@pytest.mark.parametrize("wait", ["", "0", "1"])
def test_a_held_lock_refuses_the_second_cluster_after_the_wait(
    lock_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, wait: str
) -> None:
    monkeypatch.setenv("PTAH_LAB_LOCK_WAIT", wait)
    said: list[str] = []
    with lock_path.open("ab") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(ClusterStartError, match="another lab cluster is running"):
            LocalCluster(tmp_path / "lab", echo=said.append)._take_lock()
    assert said == ([f"# waiting up to 1s for {lock_path}"] if wait == "1" else [])


def test_waiters_take_turns_in_the_order_they_came(tmp_path: Path) -> None:
    queue = tmp_path / "queue"
    queue.mkdir()
    # A ticket left by a waiter that was killed: its process is gone, it blocks no one.
    (queue / f"{0:020d}-{2**22 + 1}").touch()
    earlier = _Turns(queue)
    later = _Turns(queue)
    assert (earlier.first(), later.first()) == (True, False)
    earlier.leave()
    assert later.first()
    later.leave()
    assert list(queue.iterdir()) == []
