"""``python -m manager.crdapply``: the chart's CRDs applied by the chart, before an upgrade.

Helm installs ``crds/`` on the first install and never again, so a new chart version's
CRDs had to be applied by hand before ``helm upgrade``. The chart's pre-upgrade hook
runs this program in the new manager image, under a ServiceAccount of its own that may
only read and patch the operator's CRDs by name (and create a new kind's): it applies
the CRDs this image's models generate (``jobclaim.crds``, the same text as the chart's
``crds/``) by server-side apply.

It refuses, before applying anything, an upgrade that would drop what is stored: a
version the cluster has stored objects in (``status.storedVersions``) that the new CRD
no longer serves, or a field a stored version's schema has and the new one lacks (a
downgrade, or a rename without a migration). Structural pruning would silently remove
that field from every object on its next write. Exit 2 and a sentence per finding
fail the hook, and Helm then leaves the release as it was.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import yaml

from jobclaim.apiserver import ApiError, NotFound, Object, Resource
from jobclaim.crds import crds
from kube.client import KubeApi

__all__ = ["CUSTOM_RESOURCE_DEFINITIONS", "FIELD_MANAGER", "apply_crds", "dropped", "main"]

CUSTOM_RESOURCE_DEFINITIONS: Final = Resource(
    "apiextensions.k8s.io",
    "v1",
    "customresourcedefinitions",
    "CustomResourceDefinition",
    namespaced=False,
)
FIELD_MANAGER: Final = "ptah-operator-crd-upgrade"
EXIT_REFUSED: Final = 2


def _fields(schema: Mapping[str, Any], prefix: str = "") -> Iterator[str]:
    """Every property path a structural schema declares (``spec.target.urlFrom``)."""
    for name, child in (schema.get("properties") or {}).items():
        path = f"{prefix}.{name}" if prefix else name
        yield path
        yield from _fields(child, path)
    items = schema.get("items")
    if isinstance(items, Mapping):
        yield from _fields(items, f"{prefix}[]")


def _versions(crd: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    return {
        str(version["name"]): version for version in (crd.get("spec") or {}).get("versions") or []
    }


def dropped(live: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """What applying ``new`` over ``live`` would drop of what is stored. Pure."""
    name = (live.get("metadata") or {}).get("name", "?")
    stored = (live.get("status") or {}).get("storedVersions") or []
    live_versions, new_versions = _versions(live), _versions(new)
    found: list[str] = []
    for version in stored:
        served = new_versions.get(version)
        if served is None or not served.get("served", False):
            found.append(
                f"{name}: objects are stored as {version}, which the new CRD does not serve"
            )
            continue
        before = live_versions.get(version, {}).get("schema", {}).get("openAPIV3Schema") or {}
        after = served.get("schema", {}).get("openAPIV3Schema") or {}
        for field in sorted(set(_fields(before)) - set(_fields(after))):
            found.append(f"{name}: {version} field {field} is stored and the new CRD drops it")
    return found


def apply_crds(
    api: KubeApi, documents: Sequence[Object], out: Callable[[str], None], *, dry_run: bool = False
) -> int:
    """Check every CRD against the live one, then apply them all; the exit code."""
    refusals: list[str] = []
    for crd in documents:
        try:
            live = api.get(CUSTOM_RESOURCE_DEFINITIONS, None, crd["metadata"]["name"])
        except NotFound:
            continue  # a new kind: nothing of it is stored
        refusals += dropped(live, crd)
    if refusals:
        for line in refusals:
            out(f"refused: {line}")
        out("no CRD was changed; upgrade to a chart that keeps these, or migrate them first")
        return EXIT_REFUSED
    for crd in documents:
        if not dry_run:
            api.apply(
                CUSTOM_RESOURCE_DEFINITIONS, None, crd, field_manager=FIELD_MANAGER, force=True
            )
        out(f"applied {crd['metadata']['name']}" + (" (dry run)" if dry_run else ""))
    return 0


def parser() -> argparse.ArgumentParser:
    made = argparse.ArgumentParser(
        prog="python -m manager.crdapply",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    made.add_argument("--kubeconfig", type=Path, help="default: the Pod's service account")
    made.add_argument("--dry-run", action="store_true", help="check, and apply nothing")
    return made


def main(argv: Sequence[str] | None = None, out: Callable[[str], None] = print) -> int:
    args = parser().parse_args(argv)
    documents = [yaml.safe_load(text) for text in crds().values()]
    api = KubeApi.from_kubeconfig(args.kubeconfig) if args.kubeconfig else KubeApi.in_cluster()
    try:
        return apply_crds(api, documents, out, dry_run=args.dry_run)
    except ApiError as error:
        print(f"python -m manager.crdapply: error: {error}", file=sys.stderr)
        return 1
    finally:
        api.close()


if __name__ == "__main__":
    sys.exit(main())
