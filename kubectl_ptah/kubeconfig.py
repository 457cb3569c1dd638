"""Which kubeconfig, which context and which namespace, resolved the way kubectl does.

kubectl hands a plugin the user's own arguments, so ``--kubeconfig``, ``--context`` and
``-n`` arrive here as flags, and ``KUBECONFIG`` as the environment it inherited:

- the files: ``--kubeconfig`` (one file, which must exist), else ``KUBECONFIG``, a list
  separated by ``os.pathsep`` in which files that do not exist are skipped (at least
  one must exist), else ``~/.kube/config``;
- the merge: client-go's rule, the first file to define a context, cluster or user
  name, or a ``current-context``, wins;
- the context: ``--context``, else the merged ``current-context``;
- the namespace: ``-n``, else the context's ``namespace``, else ``default``.

The connection itself is made by ``kube.client.KubeApi`` over the ``kubernetes``
client's loader, which reads the same list (``location``) and keeps the first
definition of a name, as kubectl does; but it lets the *last* file's
``current-context`` win, so the context resolved here is always passed to it by name.

Pure apart from reading the files: the environment and the home directory are
arguments, so a test gives its own.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from kubectl_ptah.errors import KubeconfigError

DEFAULT_NAMESPACE = "default"


@dataclass(frozen=True, slots=True)
class Kubeconfig:
    """The kubeconfig files a command reads, and the context it uses."""

    files: tuple[Path, ...]  # the files that exist and hold something, in merge order
    source: str  # where the list came from: --kubeconfig, $KUBECONFIG or ~/.kube/config
    context: str
    namespace: str | None  # the context's own namespace, if it names one
    server: str  # the context's cluster's API server, for the sentence when it is down

    @property
    def location(self) -> str:
        """The files as the ``kubernetes`` client's loader reads a list of them."""
        return os.pathsep.join(str(f) for f in self.files)


def candidates(flag: Path | None, environ: Mapping[str, str], home: Path) -> tuple[list[Path], str]:
    """The files to read, in merge order, and where that list came from."""
    if flag is not None:
        return [flag], "--kubeconfig"
    listed = environ.get("KUBECONFIG", "")
    if listed:
        return [Path(p).expanduser() for p in listed.split(os.pathsep) if p], "$KUBECONFIG"
    return [home / ".kube" / "config"], "~/.kube/config"


def _read(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise KubeconfigError(f"the kubeconfig {path} is not UTF-8 text") from None
    except OSError as error:
        why = (error.strerror or type(error).__name__).lower()
        raise KubeconfigError(f"cannot read the kubeconfig {path}: {why}") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        problem = getattr(error, "problem", None) or "not YAML"
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise KubeconfigError(
            f"the kubeconfig {path} is not valid YAML: {problem}{where}"
        ) from None


def _named(
    path: Path, document: Mapping[str, Any], key: str
) -> list[tuple[str, Mapping[str, Any]]]:
    """A kubeconfig list (contexts, clusters, users) as (name, body) pairs, checked."""
    entries = document.get(key)
    if entries is None:
        return []
    body_key = key[:-1]  # contexts -> context, clusters -> cluster, users -> user
    if not isinstance(entries, list):
        raise KubeconfigError(f"the kubeconfig {path} has a {key} entry that is not a list")
    out: list[tuple[str, Mapping[str, Any]]] = []
    for entry in entries:
        name = entry.get("name") if isinstance(entry, dict) else None
        body = entry.get(body_key) if isinstance(entry, dict) else None
        if not isinstance(name, str) or not name or not isinstance(body, dict):
            raise KubeconfigError(
                f"the kubeconfig {path} has a {key} entry without a name and a {body_key}"
            )
        out.append((name, body))
    return out


def load(
    flag: Path | None, context: str | None, environ: Mapping[str, str], home: Path
) -> Kubeconfig:
    """The kubeconfig and context a command uses; ``KubeconfigError`` says why not."""
    paths, source = candidates(flag, environ, home)
    if flag is not None and os.pathsep in str(flag):
        # The client's loader would read it as a list of files: refuse, never guess.
        raise KubeconfigError(f"the --kubeconfig path {flag} contains {os.pathsep!r}")
    existing = [p for p in paths if p.exists()]
    if not existing:
        if source == "$KUBECONFIG":
            named = ", ".join(str(p) for p in paths)
            raise KubeconfigError(
                f"none of the kubeconfig files $KUBECONFIG names exists ({named})"
            )
        hint = "" if flag is not None else "; pass --kubeconfig or set KUBECONFIG"
        raise KubeconfigError(f"no kubeconfig at {paths[0]} ({source}){hint}")
    merged: dict[str, dict[str, Mapping[str, Any]]] = {"contexts": {}, "clusters": {}, "users": {}}
    current: str | None = None
    files: list[Path] = []
    for path in existing:
        document = _read(path)
        if document is None:
            continue  # an empty file defines nothing, as kubectl reads it
        if not isinstance(document, dict):
            raise KubeconfigError(f"the kubeconfig {path} is not a mapping of kubeconfig fields")
        files.append(path)
        for key, defined in merged.items():
            for name, body in _named(path, document, key):
                defined.setdefault(name, body)  # the first definition wins
        named_current = document.get("current-context")
        if current is None and isinstance(named_current, str) and named_current:
            current = named_current
    where = _where(files or existing)
    chosen = context or current
    if chosen is None:
        raise KubeconfigError(f"the kubeconfig {where} sets no current context; pass --context")
    found = merged["contexts"].get(chosen)
    if found is None:
        raise KubeconfigError(f"the kubeconfig {where} has no context named {chosen!r}")
    cluster_name = found.get("cluster")
    cluster = merged["clusters"].get(cluster_name) if isinstance(cluster_name, str) else None
    if cluster is None:
        raise KubeconfigError(
            f"the context {chosen!r} names the cluster {cluster_name!r}, "
            f"which the kubeconfig {where} does not define"
        )
    namespace = found.get("namespace")
    if namespace is not None and not isinstance(namespace, str):
        raise KubeconfigError(f"the context {chosen!r} has a namespace that is not a string")
    return Kubeconfig(
        files=tuple(files),
        source=source,
        context=chosen,
        namespace=namespace or None,
        server=str(cluster.get("server") or "?"),
    )


def _where(files: Sequence[Path]) -> str:
    return os.pathsep.join(str(f) for f in files)
