"""``python -m manager.crdapply``: the chart's CRDs applied by the chart, before an upgrade.

Helm installs ``crds/`` on the first install and never again, so a new chart version's
CRDs had to be applied by hand before ``helm upgrade``. The chart's pre-upgrade hook
runs this program in the new manager image, under a ServiceAccount of its own that may
only read and patch the operator's CRDs by name (and create a new kind's): it applies
the CRDs this image's models generate (``jobclaim.crds``, the same text as the chart's
``crds/``) by server-side apply.

The chart gives it its own ``crds/`` (``--from``, the hook's ConfigMap), so a chart
version carries its CRDs whichever image it runs; without ``--from`` it applies what
this image's models generate, the same text for the image a chart version ships.

It refuses, before applying anything, an upgrade that would drop what is stored: a
version the cluster has stored objects in (``status.storedVersions``) that the new CRD
no longer serves, or a field a stored version's schema has, the new one lacks, and
an object of that kind holds a value in (a downgrade, or a rename without a
migration). Structural pruning would silently remove that value from the object. A
field no object holds goes with the older CRD and is said so: that is what a
rollback right after an upgrade that added an optional field does. Exit 2 and a
sentence per finding fail the hook, and Helm then leaves the release as it was. An
object written with the field between the check and the apply loses it; nothing
writes a field only a newer version knows while that version's rollback runs.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import yaml

from jobclaim.apiserver import ApiError, NotFound, Object, Refused, Resource, Unavailable
from jobclaim.crds import crds
from kube.client import KubeApi

__all__ = [
    "CUSTOM_RESOURCE_DEFINITIONS",
    "FIELD_MANAGER",
    "Drop",
    "apply_crds",
    "dropped",
    "drops",
    "holds",
    "main",
    "read_crds",
]

CUSTOM_RESOURCE_DEFINITIONS: Final = Resource(
    "apiextensions.k8s.io",
    "v1",
    "customresourcedefinitions",
    "CustomResourceDefinition",
    namespaced=False,
)
FIELD_MANAGER: Final = "ptah-operator-crd-upgrade"
EXIT_REFUSED: Final = 2
# Inside the hook's activeDeadlineSeconds (300) with room for the applies.
LIST_DEADLINE_SECONDS: Final = 60.0
LIST_POLL_SECONDS: Final = 0.5


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


@dataclass(frozen=True)
class Drop:
    """What applying a CRD would take away: a stored version, or one field of it."""

    crd: str
    version: str
    field: str | None = None  # None: the version itself is no longer served

    def __str__(self) -> str:
        if self.field is None:
            return (
                f"{self.crd}: objects are stored as {self.version}, which the new CRD does "
                "not serve"
            )
        return f"{self.crd}: {self.version} field {self.field} is stored and the new CRD drops it"


def drops(live: Mapping[str, Any], new: Mapping[str, Any]) -> list[Drop]:
    """What applying ``new`` over ``live`` would take from the stored versions. Pure."""
    name = str((live.get("metadata") or {}).get("name", "?"))
    stored = (live.get("status") or {}).get("storedVersions") or []
    live_versions, new_versions = _versions(live), _versions(new)
    found: list[Drop] = []
    for version in stored:
        served = new_versions.get(version)
        if served is None or not served.get("served", False):
            found.append(Drop(name, version))
            continue
        before = live_versions.get(version, {}).get("schema", {}).get("openAPIV3Schema") or {}
        after = served.get("schema", {}).get("openAPIV3Schema") or {}
        found += [
            Drop(name, version, field)
            for field in sorted(set(_fields(before)) - set(_fields(after)))
        ]
    return found


def dropped(live: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """``drops`` as sentences, every field counted as stored. Pure."""
    return [str(drop) for drop in drops(live, new)]


def holds(obj: Mapping[str, Any], field: str) -> bool:
    """Whether ``obj`` has a value at ``field``, a path as ``_fields`` writes it
    (``spec.steps[].name``: any item's). Pure."""
    values: list[Any] = [obj]
    for part in field.split("."):
        name = part.removesuffix("[]")
        found = [v[name] for v in values if isinstance(v, Mapping) and name in v]
        if part.endswith("[]"):
            found = [item for v in found if isinstance(v, list) for item in v]
        values = found
    return bool(values)


def _resource(crd: Mapping[str, Any], version: str) -> Resource:
    names = crd["spec"]["names"]
    return Resource(
        crd["spec"]["group"],
        version,
        names["plural"],
        names["kind"],
        namespaced=crd["spec"].get("scope") == "Namespaced",
    )


def _list(api: KubeApi, resource: Resource) -> list[Object]:
    """Every object of ``resource``. For a while after its CRD changed the API server
    answers a list with "storage is (re)initializing" (429, which the client calls a
    refusal; for a read it only means later): asked again until it answers, within
    LIST_DEADLINE_SECONDS."""
    deadline = time.monotonic() + LIST_DEADLINE_SECONDS
    while True:
        try:
            return list(api.list(resource, None))
        except (Unavailable, Refused) as error:
            if (isinstance(error, Refused) and error.status != 429) or (
                time.monotonic() > deadline
            ):
                raise
            time.sleep(LIST_POLL_SECONDS)


def _holders(api: KubeApi, live: Mapping[str, Any], drop: Drop) -> list[str]:
    """The objects (``namespace/name``) that hold a value in the field ``drop`` names."""
    assert drop.field is not None
    return [
        "/".join(filter(None, (o["metadata"].get("namespace"), o["metadata"]["name"])))
        for o in _list(api, _resource(live, drop.version))
        if holds(o, drop.field)
    ]


def apply_crds(
    api: KubeApi, documents: Sequence[Object], out: Callable[[str], None], *, dry_run: bool = False
) -> int:
    """Check every CRD against the live one, then apply them all; the exit code."""
    refusals: list[str] = []
    going: list[str] = []
    for crd in documents:
        try:
            live = api.get(CUSTOM_RESOURCE_DEFINITIONS, None, crd["metadata"]["name"])
        except NotFound:
            continue  # a new kind: nothing of it is stored
        for drop in drops(live, crd):
            if drop.field is None:
                refusals.append(str(drop))
                continue
            holders = _holders(api, live, drop)
            if holders:
                shown = ", ".join(holders[:3]) + (" ..." if len(holders) > 3 else "")
                refusals.append(
                    f"{drop.crd}: {drop.version} field {drop.field} is stored in "
                    f"{len(holders)} object(s) ({shown}) and the new CRD drops it"
                )
            else:
                going.append(
                    f"{drop.crd}: {drop.version} field {drop.field} goes: no object holds it"
                )
    if refusals:
        for line in refusals:
            out(f"refused: {line}")
        out("no CRD was changed; upgrade to a chart that keeps these, or migrate them first")
        return EXIT_REFUSED
    for line in going:
        out(line)
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
    made.add_argument(
        "--from",
        dest="source",
        type=Path,
        help="apply the CRDs in this directory's *.yaml (the chart's crds/); "
        "default: the ones this image's models generate",
    )
    return made


def read_crds(source: Path | None) -> list[Object]:
    """The CRDs to apply: every ``*.yaml`` in ``source`` by name, else the models'."""
    if source is None:
        return [yaml.safe_load(text) for text in crds().values()]
    # A mounted ConfigMap's files are links beside its hidden ..data directory.
    found = [yaml.safe_load(path.read_text()) for path in sorted(source.glob("*.yaml"))]
    if not found:
        raise FileNotFoundError(f"no *.yaml in {source}")
    return found


def main(argv: Sequence[str] | None = None, out: Callable[[str], None] = print) -> int:
    args = parser().parse_args(argv)
    try:
        documents = read_crds(args.source)
    except (OSError, yaml.YAMLError) as error:
        print(f"python -m manager.crdapply: error: {error}", file=sys.stderr)
        return 1
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
