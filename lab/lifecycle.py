"""``make run RUN_ARGS="--once --approve --lifecycle"``: the chart's life after install.

Once both examples are InSync on the chart installed from ``oci://``:

1. **Upgrade** to a second release: the chart packaged as ``<version>-lab.2`` and a
   manager image, both pushed beside the first, with ``--reuse-values`` and the new
   image. It carries a CRD change made as a release makes one: one more optional field
   in PtahSchema's spec model (``spec.upgradeNote``), the chart's ``crds/`` generated
   from the changed models, and the first manager image with that module replaced (a
   ``crane append`` layer), so its webhooks admit the field. The pre-upgrade hook
   (``manager.crdapply --from`` the chart's ``crds/``) must have succeeded, as Helm's
   record of the release says; the stored PtahSchema CRD must have the field, written
   by the hook's field manager; and the manager must be ready again.
2. **Rollback** to revision 1, twice. First while the example PtahSchema holds a value
   in the new field: the pre-rollback hook refuses (its log names the field and the
   object), ``helm rollback`` fails, the stored CRD keeps the field, and the second
   release stays deployed. Then, the value removed: the chart version is the first
   again, the hook ran again and applied the first version's CRDs (no object holds the
   field, so it goes: the stored CRD lacks it), and the manager is ready.
3. **Uninstall**, as docs/operations.md says: the examples are deleted while the
   manager runs (it releases their finalizers), then ``helm uninstall``. Nothing of the
   operator may be left but what the page says is left on purpose: the CRDs and the
   rotator's Secret, which is then deleted too.

Any step that does not hold ends the run with a sentence (``InstallError``).
"""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from jobclaim.apiserver import LEASES, PODS, NotFound, Resource
from lab import install
from lab.artifacts import run_crane

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
# The second release's model change: one optional field in PtahSchema's spec, added to
# jobclaim/api/schema.py after SPEC_ANCHOR. Its CRDs are generated from the changed
# models, and its manager image is the first's with that one module replaced.
NEW_FIELD: Final = "upgradeNote"
SCHEMA_MODULE: Final = "jobclaim/api/schema.py"
SPEC_ANCHOR: Final = (
    "    suspend: bool = False\n"
    '    """Stop claiming new work; a dispatched Apply is still accounted for."""\n'
)
SPEC_ADDED: Final = (
    "    upgrade_note: str | None = None\n"
    '    """A note the lab\'s second release adds (lab.lifecycle)."""\n'
)
# Where the manager image installs this project (images/manager/Containerfile).
SITE: Final = "opt/ptah/lib/python3.11/site-packages"
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


def _deployed(run: LabRun) -> dict[str, Any]:
    """The release's deployed revision in Helm's history (a refused rollback leaves a
    failed revision after it)."""
    history = json.loads(_helm(run, "history", install.RELEASE, "-o", "json"))
    (deployed,) = [entry for entry in history if entry.get("status") == "deployed"]
    found: dict[str, Any] = deployed
    return found


def _hook_log(run: LabRun) -> str:
    """What the CRD hook's Pod said (a failed hook Job stays until the next hook run)."""
    pods = run.admin.list(PODS, _namespace(run), label_selector={"job-name": HOOK_MANAGER})
    return "\n".join(
        run.admin.read_pod_log(
            _namespace(run), pod["metadata"]["name"], container="crd-upgrade", limit_bytes=65536
        )
        for pod in pods
    )


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


def second_release(run: LabRun, work: Path) -> tuple[Path, str]:
    """The second release: a copy of the chart whose ``crds/`` are generated from the
    models with ``SPEC_ADDED``, and the digest of a manager image that holds the same
    models (the first image plus a layer replacing the module, pushed beside it)."""
    from lab.clusterrun import MANAGER_IMAGE  # noqa: PLC0415  (clusterrun imports this module)

    source = (install.REPO_ROOT / SCHEMA_MODULE).read_text()
    # The control: the anchor is where the field goes, and the field is new.
    assert source.count(SPEC_ANCHOR) == 1 and "upgrade_note" not in source, SCHEMA_MODULE
    changed = source.replace(SPEC_ANCHOR, SPEC_ANCHOR + SPEC_ADDED)
    models = work / "models"
    shutil.copytree(install.REPO_ROOT / "jobclaim", models / "jobclaim")
    (models / SCHEMA_MODULE).write_text(changed)
    chart = work / "ptah-operator"
    shutil.copytree(install.CHART, chart)
    # cwd first on sys.path: the changed jobclaim, not the checkout's.
    generated = subprocess.run(
        [sys.executable, "-m", "jobclaim.crds", "--out", str(chart / "crds")],
        cwd=models,
        capture_output=True,
        text=True,
        check=False,
    )
    if generated.returncode != 0:
        raise install.InstallError(f"generating the second CRDs failed: {generated.stderr}")
    differ = sorted(
        path.name
        for path in (chart / "crds").glob("*.yaml")
        if path.read_text() != (install.CHART / "crds" / path.name).read_text()
    )
    if differ != [SCHEMAS_FILE]:
        raise install.InstallError(f"the second release's CRD change is {differ}")

    layer = work / "schema-layer.tar"
    package = f"{SITE}/jobclaim/api"
    with tarfile.open(layer, "w") as tar:
        # The whiteout drops the image's compiled copy of the old module; the image's
        # filesystem is read-only, so Python compiles the new source in memory.
        for name, data in (
            (f"{package}/schema.py", changed.encode()),
            (f"{package}/__pycache__/.wh.schema.cpython-311.pyc", b""),
        ):
            entry = tarfile.TarInfo(name)
            entry.size, entry.mode, entry.mtime = len(data), 0o644, int(time.time())
            tar.addfile(entry, io.BytesIO(data))
    manager = run.images[MANAGER_IMAGE]
    said = run_crane(
        run.lab.crane, "append", "-b", manager.ref, "-f", str(layer), "-t",
        f"{manager.repository}:lab.2",
    )  # fmt: skip
    digest = said.strip().rsplit("@", 1)[-1]
    if not digest.startswith("sha256:") or digest == manager.digest:
        raise install.InstallError(f"crane append said {said.strip()!r}")
    return chart, digest


def _crd_change(run: LabRun) -> tuple[bool, list[str]]:
    """Whether the stored PtahSchema CRD has the new field, and which field managers
    wrote it."""
    crd = run.admin.get(CRDS, None, SCHEMAS_CRD)
    (version,) = crd["spec"]["versions"]
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    managers = sorted(
        {str(entry.get("manager")) for entry in crd["metadata"].get("managedFields") or []}
    )
    return NEW_FIELD in spec, managers


def _until(what: str, condition: Callable[[], bool]) -> None:
    end = time.monotonic() + DEADLINE
    while not condition():
        if time.monotonic() > end:
            raise install.InstallError(f"{what} did not happen within {DEADLINE:.0f}s")
        time.sleep(0.5)


def _labelled(run: LabRun, labels: dict[str, str]) -> list[tuple[Resource, str]]:
    """Every object of the kinds the chart installs with these labels: (kind, "Kind name")."""
    found = []
    for resource in INSTALLED:
        namespace = _namespace(run) if resource.namespaced else None
        for obj in run.admin.list(resource, namespace, label_selector=labels):
            found.append((resource, f"{resource.kind} {obj['metadata']['name']}"))
    return sorted(found, key=lambda item: item[1])


def _install_job(run: LabRun, version: str) -> str:
    """The rotator's install Job of chart ``version`` in Helm's record of its revision."""
    history = json.loads(_helm(run, "history", install.RELEASE, "-o", "json"))
    (revision,) = [
        e["revision"]
        for e in history
        if e.get("chart") == f"ptah-operator-{version}" and e.get("status") == "superseded"
    ]
    manifest = _helm(run, "get", "manifest", install.RELEASE, "--revision", str(revision))
    (name,) = set(re.findall(r"name: (\S+-cert-init-[0-9a-f]{10})\n", manifest))
    return str(name)


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

    # 1. Upgrade to a second release, with a CRD change generated from a model change.
    field, _ = _crd_change(run)
    if field:
        raise install.InstallError(f"the first version's {SCHEMAS_CRD} already has the change")
    version = f"{first.version}-lab.2"
    chart, digest = second_release(run, run.workdir / "release-2")
    package = install.package_chart(run.workdir / "push" / "chart-2", chart=chart, version=version)
    second = install.push_chart(package, run.lab.registry)
    repository = run.chart.manager_repository
    _helm(
        run, "upgrade", install.RELEASE, *second.arguments(), "--reuse-values",
        "--set", f"image.digest={digest}",
        "--set", f"execution.runnerImage={repository}@{digest}",
    )  # fmt: skip
    release = _release(run)
    if release["chart"] != f"ptah-operator-{version}" or str(release["revision"]) != "2":
        raise install.InstallError(f"the upgrade left the release at {release}")
    missing = _hook_ran(run)
    if missing:
        raise install.InstallError(f"the pre-upgrade hook did not run: {missing}")
    field, managers = _crd_change(run)
    if not (field and HOOK_MANAGER in managers):
        raise install.InstallError(
            f"after the upgrade {SCHEMAS_CRD} has spec.{NEW_FIELD}: {field}; its field "
            f"managers: {managers}"
        )
    install.wait_ready(
        run.admin,
        namespace,
        kubeconfig=run.lab.kubeconfig("admin"),
        report=say,
        timeout=DEADLINE,
        check=run.lab.check,
    )
    say(
        f"# upgraded to {second} with the manager {digest}: revision 2, the CRD hook Job "
        f"succeeded and the stored {SCHEMAS_CRD} has spec.{NEW_FIELD} (field managers "
        f"{', '.join(managers)}), manager ready"
    )

    # 2a. A rollback while an object holds the new field: refused by the hook.
    (holder,) = [(r, where, name) for r, where, name in resources if r.kind == "PtahSchema"]
    held = f"{holder[1]}/{holder[2]}"
    run.admin.patch_spec(holder[0], holder[1], holder[2], {NEW_FIELD: "held"})
    try:
        _helm(run, "rollback", install.RELEASE, "1")
    except install.InstallError as error:
        failed = str(error)
    else:
        raise install.InstallError(f"helm rollback passed while {held} held spec.{NEW_FIELD}")
    said = _hook_log(run)
    refusal = (
        f"refused: {SCHEMAS_CRD}: v1alpha1 field spec.{NEW_FIELD} is stored in 1 object(s) "
        f"({held}) and the new CRD drops it"
    )
    field, _ = _crd_change(run)
    deployed = _deployed(run)
    if refusal not in said or not field or deployed["chart"] != f"ptah-operator-{version}":
        raise install.InstallError(
            f"the refused rollback: helm said {failed!r}; the hook said {said!r}; "
            f"{SCHEMAS_CRD} has the field: {field}; deployed: {deployed}"
        )
    say(
        f"# rollback refused while {held} held spec.{NEW_FIELD}: the hook said {refusal!r}; "
        f"the CRD kept the field, revision {deployed['revision']} ({version}) stays deployed"
    )
    # The holder lets go (a merge patch's null removes the field); the next rollback passes.
    run.admin.patch_spec(holder[0], holder[1], holder[2], {NEW_FIELD: None})

    # 2b. Roll back to the first.
    _helm(run, "rollback", install.RELEASE, "1")
    release = _deployed(run)
    if release["chart"] != f"ptah-operator-{first.version}":
        raise install.InstallError(f"the rollback left the release at {release}")
    missing = _hook_ran(run)
    if missing:
        raise install.InstallError(f"the pre-rollback hook did not run: {missing}")
    field, _ = _crd_change(run)
    if field:
        raise install.InstallError(
            f"after the rollback {SCHEMAS_CRD} still has spec.{NEW_FIELD}, which no object held"
        )
    install.wait_ready(
        run.admin,
        namespace,
        kubeconfig=run.lab.kubeconfig("admin"),
        report=say,
        timeout=DEADLINE,
        check=run.lab.check,
    )
    # Helm diffs this rollback against the refused one's failed revision (the first
    # version's manifest), not the deployed second: what only the second had is never
    # deleted. That is its install Job alone (named by a hash of its Pod template; every
    # other object keeps its name and is rolled back in place). docs/operations.md says
    # to delete it; here it must be exactly that Job.
    stale = _labelled(run, {"helm.sh/chart": f"ptah-operator-{version}"})
    if [name for _, name in stale] != [f"Job {_install_job(run, version)}"]:
        raise install.InstallError(
            f"after the rollback the second version left {[name for _, name in stale]}"
        )
    ((resource, name),) = stale
    run.admin.delete(resource, namespace, name.split(" ", 1)[1])
    say(
        f"# rolled back to {first}: revision {release['revision']}, the hook applied the "
        f"first version's CRDs again (spec.{NEW_FIELD}, which no object held any more, is "
        f"gone), manager ready; the second version's install {name}, which Helm leaves "
        "after a refused rollback, deleted as docs/operations.md says"
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
