"""Running the real helm against the chart, and reading what it renders.

helm is built by `make helm` from its pinned Go module. When it cannot be built
the tests fail with the build's output: a chart suite that skipped whenever helm
was missing would be green on exactly the machines where it proved nothing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "ptah-operator"
CRDS = CHART / "crds"
VALUES = ROOT / "tests" / "chart" / "values"
HELM = ROOT / ".tools" / "bin" / "helm"
KUBE_SCORE = ROOT / ".tools" / "bin" / "kube-score"

RELEASE = "ptah-operator"
NAMESPACE = "ptah-system"
MANAGER = f"system:serviceaccount:{NAMESPACE}:ptah-operator"

# A cold `go install` of helm downloads and compiles a few hundred packages.
BUILD_TIMEOUT_SECONDS = 3600
HELM_TIMEOUT_SECONDS = 120

Object = dict[str, Any]


class ToolUnavailable(Exception):
    """A tool is missing and `make <tool>` could not build it."""


class HelmUnavailable(ToolUnavailable):
    """helm is missing and `make helm` could not build it."""


def prometheus_tool(name: str) -> Path:
    """Where `make promtool` or `make prometheus` links the binary: under
    PROMETHEUS_TOOLS (default .tools)."""
    return ROOT / os.environ.get("PROMETHEUS_TOOLS", ".tools") / "bin" / name


def build_prometheus_tool(name: str = "promtool") -> Path:
    """Return promtool (or prometheus), building it with `make` when needed (as helm)."""
    return make_tool(name, prometheus_tool(name))


def build_kube_score() -> Path:
    """Return kube-score, building it with `make kube-score` when needed (as helm)."""
    return make_tool("kube-score", KUBE_SCORE)


def make_tool(name: str, binary: Path) -> Path:
    """Run `make <name>`, which builds ``binary`` when it is missing or stale; the binary."""
    make = shutil.which("make")
    if make is None:
        raise ToolUnavailable(f"make is not on PATH, so `make {name}` cannot build {name}")
    try:
        done = subprocess.run(
            [make, "--no-print-directory", name],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=BUILD_TIMEOUT_SECONDS,
            check=False,
        )
    except subprocess.TimeoutExpired as error:
        raise ToolUnavailable(f"`make {name}` did not finish in {error.timeout}s") from error
    if done.returncode != 0 or not binary.exists():
        output = (done.stdout + done.stderr).strip().splitlines()[-40:]
        raise ToolUnavailable(
            f"`make {name}` failed (exit {done.returncode}):\n" + "\n".join(output)
        )
    return binary


def build_helm() -> Path:
    """Return the helm binary, building it with `make helm` when needed.

    Always asks make rather than trusting an existing file: make knows whether
    the binary matches the pinned version, and answers in milliseconds when it does.
    """
    make = shutil.which("make")
    if make is None:
        raise HelmUnavailable("make is not on PATH, so `make helm` cannot build helm")
    try:
        done = subprocess.run(
            [make, "--no-print-directory", "helm"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=BUILD_TIMEOUT_SECONDS,
            check=False,
        )
    except subprocess.TimeoutExpired as error:
        raise HelmUnavailable(f"`make helm` did not finish in {error.timeout}s") from error
    if done.returncode != 0 or not HELM.exists():
        output = (done.stdout + done.stderr).strip().splitlines()[-40:]
        raise HelmUnavailable(f"`make helm` failed (exit {done.returncode}):\n" + "\n".join(output))
    return HELM


@dataclass(frozen=True)
class Result:
    returncode: int
    stdout: str
    stderr: str


class Helm:
    """The helm binary, run with a private home so no user configuration leaks in."""

    def __init__(self, binary: Path, home: Path) -> None:
        self.binary = binary
        self.env = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": str(home),
            "HELM_CACHE_HOME": str(home / "cache"),
            "HELM_CONFIG_HOME": str(home / "config"),
            "HELM_DATA_HOME": str(home / "data"),
            # No cluster: `lookup` finds nothing and nothing is ever contacted.
            "KUBECONFIG": str(home / "no-kubeconfig"),
        }

    def run(self, *args: str) -> Result:
        done = subprocess.run(
            [str(self.binary), *args],
            capture_output=True,
            text=True,
            env=self.env,
            timeout=HELM_TIMEOUT_SECONDS,
            check=False,
        )
        return Result(done.returncode, done.stdout, done.stderr)

    def template(
        self,
        values: Sequence[Path] = (),
        settings: Mapping[str, str] | None = None,
        *,
        namespace: str = NAMESPACE,
        extra: Iterable[str] = (),
    ) -> Result:
        args = ["template", RELEASE, str(CHART), "--namespace", namespace]
        for path in values:
            args += ["--values", str(path)]
        for key, value in (settings or {}).items():
            args += ["--set", f"{key}={value}"]
        return self.run(*args, *extra)

    def render(
        self,
        values: Sequence[Path] = (),
        settings: Mapping[str, str] | None = None,
        *,
        namespace: str = NAMESPACE,
        extra: Iterable[str] = (),
    ) -> list[Object]:
        result = self.template(values, settings, namespace=namespace, extra=extra)
        if result.returncode != 0:
            raise AssertionError(f"helm template failed:\n{result.stderr}")
        return load_documents(result.stdout)


class _UniqueKeyLoader(yaml.SafeLoader):
    """A YAML loader that refuses a mapping with a key twice.

    PyYAML keeps the last value of a repeated key without a word, while the API
    server's strict decoding refuses the object: a template that writes a label
    twice would pass here and fail at install.
    """


def _mapping_without_duplicates(loader: _UniqueKeyLoader, node: yaml.MappingNode) -> Object:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark
            )
        seen.add(key)
    return {str(k): v for k, v in loader.construct_mapping(node, deep=True).items()}


_UniqueKeyLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping_without_duplicates
)


def load_documents(text: str) -> list[Object]:
    """Every non-empty document of a multi-document YAML stream."""
    return [doc for doc in yaml.load_all(text, Loader=_UniqueKeyLoader) if doc]


def load_yaml(path: Path) -> Any:
    return yaml.load(path.read_text(), Loader=_UniqueKeyLoader)


def only(objects: Iterable[Object], kind: str, name: str | None = None) -> Object:
    """The one rendered object of this kind (and name); fails if there is not exactly one."""
    found = [
        o for o in objects if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)
    ]
    assert len(found) == 1, f"expected one {kind} {name or ''}, rendered {len(found)}"
    return found[0]


def of_kind(objects: Iterable[Object], kind: str) -> list[Object]:
    return [o for o in objects if o["kind"] == kind]


def rules_of(objects: list[Object]) -> list[dict[str, Any]]:
    """Every rule the manager's ServiceAccount is bound to, read from the bindings."""
    bound = {
        (b["roleRef"]["kind"], b["roleRef"]["name"])
        for b in objects
        if b["kind"] in {"ClusterRoleBinding", "RoleBinding"}
        and any(s.get("name") == "ptah-operator" for s in b["subjects"])
    }
    roles = [o for o in objects if (o["kind"], o["metadata"]["name"]) in bound]
    assert roles, "no role is bound to the manager: nothing below would prove anything"
    return [rule for role in roles for rule in role["rules"]]


def grants(rules: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    return {
        (group, resource, verb)
        for rule in rules
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
