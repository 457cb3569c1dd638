"""The built archives a test module of this folder names, read, unpacked under runc's
work directory once per module.

Each module says which archives it judges in ``IMAGES`` (names under build/images);
the fixtures are module-scoped because unpacking an image costs seconds and hundreds
of MB, and the work directory is checked at the end for containers left running.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.images import runc
from tests.images.oci import Archive, read_built, unpack


@pytest.fixture(scope="module")
def archives(request: pytest.FixtureRequest) -> dict[str, Archive]:
    return read_built(request.module.IMAGES)


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    with runc.workdir(tmp_path_factory, "images") as path:
        yield path


@pytest.fixture(scope="module")
def roots(archives: dict[str, Archive], work: Path) -> dict[str, Path]:
    unpacked = {}
    for name, archive in archives.items():
        unpacked[name] = work / "rootfs" / name
        unpack(archive, unpacked[name])
    return unpacked
