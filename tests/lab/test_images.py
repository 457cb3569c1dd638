"""The lab's OCI image layouts are valid and reproducible."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path

import pytest

from lab.cluster.images import oci_layout

FILES = {"probe": (b"\x7fELF fake", 0o755), "etc/motd": (b"hi\n", 0o644)}


def _blob(layout: Path, digest: str) -> bytes:
    return (layout / "blobs" / "sha256" / digest.removeprefix("sha256:")).read_bytes()


def test_a_layout_holds_one_manifest_its_config_and_its_layer(tmp_path: Path) -> None:
    digest = oci_layout(tmp_path, FILES, ["/probe"])
    index = json.loads((tmp_path / "index.json").read_text())
    assert [m["digest"] for m in index["manifests"]] == [digest]
    manifest_bytes = _blob(tmp_path, digest)
    assert "sha256:" + hashlib.sha256(manifest_bytes).hexdigest() == digest
    manifest = json.loads(manifest_bytes)
    config = json.loads(_blob(tmp_path, manifest["config"]["digest"]))
    assert config["config"]["Entrypoint"] == ["/probe"]
    assert (config["os"], config["architecture"]) == ("linux", "amd64")
    layer = _blob(tmp_path, manifest["layers"][0]["digest"])
    # Uncompressed, so the layer's digest is also its diff id.
    assert config["rootfs"]["diff_ids"] == [manifest["layers"][0]["digest"]]
    with tarfile.open(fileobj=io.BytesIO(layer)) as tar:
        members = {m.name: m for m in tar.getmembers()}
        assert set(members) == {"etc", "etc/motd", "probe"}
        assert members["probe"].mode == 0o755
        assert (members["probe"].uid, members["probe"].mtime) == (0, 0)


def test_the_same_files_make_the_same_image(tmp_path: Path) -> None:
    first = oci_layout(tmp_path / "a", FILES, ["/probe"])
    assert oci_layout(tmp_path / "b", dict(reversed(FILES.items())), ["/probe"]) == first
    assert oci_layout(tmp_path / "c", FILES, ["/probe", "say"]) != first


@pytest.mark.parametrize("path", ["/probe", "../probe", "a/../../b"])
def test_a_path_outside_the_image_is_refused(tmp_path: Path, path: str) -> None:
    with pytest.raises(ValueError, match="must be relative and inside the image"):
        oci_layout(tmp_path, {path: (b"", 0o644)}, ["/probe"])
