"""The chart as a platform team receives it: packaged, pushed to an OCI registry and
rendered from ``oci://``, with only the images given (``lab.install``, which ``make
run`` installs through; ``make chart`` packages the same way)."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest

from lab import install
from tests.support.chartrender import CHART, HELM, Helm, load_documents, load_yaml

pytestmark = [pytest.mark.registry, pytest.mark.helm]

IMAGES = [
    "--set",
    "image.repository=registry.example.com/ptah/ptah-operator",
    "--set",
    "image.digest=sha256:" + "1" * 64,
    "--set",
    "execution.executorImage=registry.example.com/ptah/executor@sha256:" + "2" * 64,
    "--set",
    "execution.runnerImage=registry.example.com/ptah/runner@sha256:" + "3" * 64,
    "--set-string",
    "execution.ptahVersion=1.4.2",
]


def test_the_packaged_chart_installs_from_oci_with_only_the_images(
    helm: Helm,
    registry: str,
    tmp_path: Path,
) -> None:
    package = install.package_chart(tmp_path, helm=HELM)
    version = load_yaml(CHART / "Chart.yaml")["version"]
    assert package.name == f"ptah-operator-{version}.tgz"
    with tarfile.open(package) as archive:
        names = archive.getnames()
    # The CRDs travel with it; the chart-testing values do not.
    assert any(name.startswith("ptah-operator/crds/") for name in names)
    assert not any(name.startswith("ptah-operator/ci/") for name in names)

    source = install.push_chart(package, registry, helm=HELM)
    assert source.reference == f"oci://{registry}/charts/ptah-operator"
    assert source.version == version
    pulled = helm.run(
        "template", "ptah-operator", *source.arguments(), "-n", "ptah-system", *IMAGES
    )
    assert pulled.returncode == 0, pulled.stderr
    local = helm.run("template", "ptah-operator", str(CHART), "-n", "ptah-system", *IMAGES)
    # The control: the local render works, and the pulled chart renders the same bytes.
    assert local.returncode == 0, local.stderr
    assert pulled.stdout == local.stdout
    assert len(load_documents(pulled.stdout)) > 20
