"""``make run RUN_ARGS="--once --approve --lifecycle"``: the chart's life after install.

Once both examples are InSync on the chart installed from ``oci://``:

1. **Upgrade** to a second packaged version, ``<version>-lab.2``, pushed beside the
   first, with ``--reuse-values``. It carries a CRD change: its ``crds/`` are what the
   models generate with one more optional field in PtahSchema's spec
   (``spec.upgradeNote``) and a printer column showing it, what a next release's
   model change would generate. The pre-upgrade hook (``manager.crdapply --from`` the
   chart's ``crds/``) must have succeeded, as Helm's record of the release says; the
   stored PtahSchema CRD must have the field and the column, written by the hook's
   field manager; and the manager must be ready again.
2. **Rollback** to revision 1: the chart version is the first again, the pre-rollback
   hook ran again and applied the first version's CRDs (no object holds the new field,
   so it goes: the stored CRD has neither field nor column), and the manager is ready.
   A field an object holds would be refused instead (``tests/realapi/test_crd_upgrade.py``).
3. **Uninstall**, as docs/operations.md says: the examples are deleted while the
   manager runs (it releases their finalizers), then ``helm uninstall``. Nothing of the
   operator may be left but what the page says is left on purpose: the CRDs and the
   rotator's Secret, which is then deleted too.

Any step that does not hold ends the run with a sentence (``InstallError``).
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import yaml

from jobclaim.apiserver import LEASES, PODS, NotFound, Resource
from lab import install

if TYPE_CHECKING:
    from lab.clusterrun import LabRun

__all__ = ["run_lifecycle"]

CRDS: Final = Resource(
    "apiextensions.k8s.io",
    "v1",
    "customresourcedefinitions",
    "CustomResourceDefinition",
    namespaced=False,
)
HOOK_MANAGER: Final = "ptah-operator-crd-upgrade"
SCHEMAS_CRD: Final = "ptahschemas.operator.ptah.run"
SCHEMAS_FILE: Final = "operator.ptah.run_ptahschemas.yaml"
# The second version's CRD change: one optional field and a column that shows it.
NEW_FIELD: Final = "upgradeNote"
NEW_COLUMN: Final = {
    "name": "Upgrade note",
    "type": "string",
    "jsonPath": f".spec.{NEW_FIELD}",
    "priority": 1,
}
SECRET: Final = "ptah-operator-webhook-tls"
PART_OF: Final = {"app.kubernetes.io/part-of": "ptah-operator"}
# What the chart installs, by kind: after uninstall none may carry the chart's label.
INSTALLED: Final = (
    Resource("apps", "v1", "deployments", "Deployment"),
    Resource("", "v1", "services", "Service"),
    Resource("", "v1", "serviceaccounts", "ServiceAccount"),
    Resource("", "v1", "secrets", "Secret"),
    Resource("batch", "v1", "cronjobs", "CronJob"),
    Resource("batch", "v1", "jobs", "Job"),
    Resource("rbac.authorization.k8s.io", "v1", "roles", "Role"),
    Resource("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding"),
    Resource("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", namespaced=False),
    Resource(
        "rbac.authorization.k8s.io",
        "v1",
        "clusterrolebindings",
        "ClusterRoleBinding",
        namespaced=False,
    ),
    Resource(
        "admissionregistration.k8s.io",
        "v1",
        "validatingwebhookconfigurations",
        "ValidatingWebhookConfiguration",
        namespaced=False,
    ),
    Resource(
        "admissionregistration.k8s.io",
        "v1",
        "mutatingwebhookconfigurations",
        "MutatingWebhookConfiguration",
        namespaced=False,
    ),
    Resource(
        "admissionregistration.k8s.io",
        "v1",
        "validatingadmissionpolicies",
        "ValidatingAdmissionPolicy",
        namespaced=False,
    ),
)
DEADLINE: Final = 300.0


def _helm(run: LabRun, *argv: str) -> str:
    kubeconfig = str(run.lab.kubeconfig("admin"))
    return install.run_helm(
        [*argv, "--kubeconfig", kubeconfig, "--namespace", _namespace(run)],
        f"helm {argv[0]}",
        timeout=DEADLINE,
    )


def _namespace(run: LabRun) -> str:
    assert run.chart is not None
    return run.chart.namespace


def _release(run: LabRun) -> dict[str, Any]:
    (release,) = [
        r for r in json.loads(_helm(run, "list", "-o", "json")) if r["name"] == install.RELEASE
    ]
    found: dict[str, Any] = release
    return found


def _hook_ran(run: LabRun) -> str | None:
    """None when Helm's record of the release shows the CRD hook Job succeeded; else
    what it and the CRDs show instead."""
    status = json.loads(_helm(run, "status", install.RELEASE, "-o", "json"))
    runs = [
        hook.get("last_run") or {}
        for hook in status.get("hooks") or []
        if hook.get("name") == HOOK_MANAGER and hook.get("kind") == "Job"
    ]
    if any(last.get("phase") == "Succeeded" for last in runs):
        return None
    (crd,) = [
        c for c in run.admin.list(CRDS, None) if c["metadata"]["name"].startswith("ptahschemas.")
    ]
    managers = sorted(
        {str(entry.get("manager")) for entry in crd["metadata"].get("managedFields") or []}
    )
    return f"the hook's runs in Helm's record: {runs}; ptahschemas' field managers: {managers}"


def second_chart(destination: Path) -> Path:
    """A copy of the chart whose PtahSchema CRD has one more optional field and a
    printer column: the models' CRD, changed as a next release's model would change it."""
    shutil.copytree(install.CHART, destination)
    path = destination / "crds" / SCHEMAS_FILE
    crd = yaml.safe_load(path.read_text())
    (version,) = crd["spec"]["versions"]
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    # The control: the first version has no such field, so this is a change.
    assert NEW_FIELD not in spec["properties"], f"{SCHEMAS_FILE} already has {NEW_FIELD}"
    spec["properties"][NEW_FIELD] = {
        "type": "string",
        "maxLength": 256,
        "description": "A note the lab's second chart version adds.",
    }
    version.setdefault("additionalPrinterColumns", []).append(NEW_COLUMN)
    path.write_text(yaml.safe_dump(crd, sort_keys=False))
    return destination


def _crd_change(run: LabRun) -> tuple[bool, bool, list[str]]:
    """Whether the stored PtahSchema CRD has the new field, the new column, and which
    field managers wrote it."""
    crd = run.admin.get(CRDS, None, SCHEMAS_CRD)
    (version,) = crd["spec"]["versions"]
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    columns = [column.get("name") for column in version.get("additionalPrinterColumns") or []]
    managers = sorted(
        {str(entry.get("manager")) for entry in crd["metadata"].get("managedFields") or []}
    )
    return NEW_FIELD in spec, NEW_COLUMN["name"] in columns, managers


def _until(what: str, condition: Callable[[], bool]) -> None:
    end = time.monotonic() + DEADLINE
    while not condition():
        if time.monotonic() > end:
            raise install.InstallError(f"{what} did not happen within {DEADLINE:.0f}s")
        time.sleep(0.5)


def _leftovers(run: LabRun) -> list[str]:
    found = []
    for resource in INSTALLED:
        namespace = _namespace(run) if resource.namespaced else None
        for obj in run.admin.list(resource, namespace, label_selector=PART_OF):
            found.append(f"{resource.kind} {obj['metadata']['name']}")
    return sorted(found)


def run_lifecycle(
    run: LabRun, say: Callable[[str], None], resources: Sequence[tuple[Resource, str, str]]
) -> None:
    """Upgrade, roll back, then uninstall; ``resources`` (kind, namespace, name) are the
    operator's objects the run made, deleted before the uninstall."""
    assert run.chart is not None and run.chart_source is not None
    first = run.chart_source
    namespace = _namespace(run)

    # 1. Upgrade to a second packaged version, with a CRD change.
    field, column, _ = _crd_change(run)
    if field or column:
        raise install.InstallError(f"the first version's {SCHEMAS_CRD} already has the change")
    version = f"{first.version}-lab.2"
    package = install.package_chart(
        run.workdir / "push" / "chart-2",
        chart=second_chart(run.workdir / "chart-2" / "ptah-operator"),
        version=version,
    )
    second = install.push_chart(package, run.lab.registry)
    _helm(run, "upgrade", install.RELEASE, *second.arguments(), "--reuse-values")
    release = _release(run)
    if release["chart"] != f"ptah-operator-{version}" or str(release["revision"]) != "2":
        raise install.InstallError(f"the upgrade left the release at {release}")
    missing = _hook_ran(run)
    if missing:
        raise install.InstallError(f"the pre-upgrade hook did not run: {missing}")
    field, column, managers = _crd_change(run)
    if not (field and column and HOOK_MANAGER in managers):
        raise install.InstallError(
            f"after the upgrade {SCHEMAS_CRD} has spec.{NEW_FIELD}: {field}, the column "
            f"{NEW_COLUMN['name']!r}: {column}; its field managers: {managers}"
        )
    install.wait_ready(run.admin, namespace, report=say, timeout=DEADLINE, check=run.lab.check)
    say(
        f"# upgraded to {second}: revision 2, the CRD hook Job succeeded and the stored "
        f"{SCHEMAS_CRD} has spec.{NEW_FIELD} and the column {NEW_COLUMN['name']!r} "
        f"(field managers {', '.join(managers)}), manager ready"
    )

    # 2. Roll back to the first.
    _helm(run, "rollback", install.RELEASE, "1")
    release = _release(run)
    if release["chart"] != f"ptah-operator-{first.version}" or str(release["revision"]) != "3":
        raise install.InstallError(f"the rollback left the release at {release}")
    missing = _hook_ran(run)
    if missing:
        raise install.InstallError(f"the pre-rollback hook did not run: {missing}")
    field, column, _ = _crd_change(run)
    if field or column:
        raise install.InstallError(
            f"after the rollback {SCHEMAS_CRD} still has spec.{NEW_FIELD}: {field}, the "
            f"column {NEW_COLUMN['name']!r}: {column}; no object held the field"
        )
    install.wait_ready(run.admin, namespace, report=say, timeout=DEADLINE, check=run.lab.check)
    say(
        f"# rolled back to {first}: revision 3, the hook applied the first version's CRDs "
        f"again (spec.{NEW_FIELD}, which no object held, and its column are gone), "
        "manager ready"
    )

    # 3. Uninstall as docs/operations.md says: the resources first, while the manager runs.
    for resource, where, name in resources:
        run.admin.delete(resource, where, name)

    def gone() -> bool:
        for resource, where, name in resources:
            try:
                run.admin.get(resource, where, name)
            except NotFound:
                continue
            return False
        return True

    _until("the examples' finalizers released", gone)
    _helm(run, "uninstall", install.RELEASE, "--wait")
    _until(
        "the manager's Pods gone",
        lambda: not run.admin.list(PODS, namespace, label_selector=install.MANAGER_PODS),
    )
    left = _leftovers(run)
    if left != [f"Secret {SECRET}"]:
        raise install.InstallError(
            f"helm uninstall left {left}; only the rotator's Secret {SECRET} may stay"
        )
    run.admin.delete(INSTALLED[3], namespace, SECRET)
    leases = [lease["metadata"]["name"] for lease in run.admin.list(LEASES, namespace)]
    say(
        "# uninstalled: the examples released first, nothing of the chart left but the "
        f"rotator's Secret {SECRET} (deleted) and the CRDs; the manager's Leases "
        f"(released, not deleted): {', '.join(sorted(leases)) or 'none'}"
    )
