"""Where the rotation publishes trust: the `caBundle` of managed webhook configurations.

The rotation only needs to read and replace bundles, so that is all the Protocol
asks for; a Kubernetes adapter, an in-memory fake and a JSON file all fit behind it.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Protocol, runtime_checkable

from certs._errors import CertificateError, RotationError, os_reason
from certs._files import atomic_write

__all__ = ["FileBundles", "InMemoryBundles", "WebhookBundles"]


@runtime_checkable
class WebhookBundles(Protocol):
    """The `caBundle` of each *managed* ValidatingWebhookConfiguration.

    An implementation is given the names of the configurations it manages and must
    never report or modify any other: the cluster may hold configurations of other
    operators, and rewriting their trust would break them.

    `read()` returns {configuration name: caBundle PEM bytes} for every managed
    configuration that currently exists, with b"" for an empty bundle. When the
    webhooks inside one configuration disagree, return b"" for it: the rotation
    then rewrites all of them, which is the safe direction.

    `write(name, bundle)` sets the caBundle of every webhook in configuration `name`
    to `bundle`. It must be durable when it returns — the rotation records progress
    right after and will never write that bundle again — and it is only called
    with names that `read()` returned. Raise `CertificateError` for expected
    failures (conflicts, permissions) with a sentence saying which configuration.
    """

    def read(self) -> dict[str, bytes]: ...

    def write(self, name: str, bundle: bytes) -> None: ...


class InMemoryBundles:
    """Bundles kept in a dict; for tests and for dry runs.

    `writes` records every write in order, so tests can assert what was published
    and that unmanaged configurations were never touched.
    """

    def __init__(
        self,
        managed: Mapping[str, bytes],
        unmanaged: Mapping[str, bytes] | None = None,
    ) -> None:
        overlap = set(managed) & set(unmanaged or {})
        if overlap:
            raise ValueError(f"names both managed and unmanaged: {sorted(overlap)}")
        self._managed = dict(managed)
        self.unmanaged: dict[str, bytes] = dict(unmanaged or {})
        self.writes: list[tuple[str, bytes]] = []

    def read(self) -> dict[str, bytes]:
        return dict(self._managed)

    def write(self, name: str, bundle: bytes) -> None:
        if name not in self._managed:
            raise RotationError(f"refusing to write the caBundle of unmanaged configuration {name}")
        self._managed[name] = bundle
        self.writes.append((name, bundle))


class FileBundles:
    """Bundles kept in a JSON file {configuration name: caBundle PEM text}, for local runs.

    `managed` names the entries this instance owns; None means every entry in the
    file. A managed name missing from the file reads as an empty bundle, so the
    first rotation fills it in. Entries not managed are preserved byte for byte.
    """

    def __init__(self, path: Path, managed: Collection[str] | None = None) -> None:
        self.path = path
        self._managed = None if managed is None else frozenset(managed)

    def _load(self) -> dict[str, str]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        except OSError as error:
            raise CertificateError(
                f"cannot read the bundles file {self.path}: {os_reason(error)}"
            ) from error
        try:
            loaded = json.loads(text) if text.strip() else {}
        except json.JSONDecodeError as error:
            raise CertificateError(f"the bundles file {self.path} is not valid JSON") from error
        if not isinstance(loaded, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in loaded.items()
        ):
            raise CertificateError(
                f"the bundles file {self.path} must be a JSON object of name to PEM text"
            )
        return loaded

    def managed_names(self) -> frozenset[str]:
        return frozenset(self._load()) if self._managed is None else self._managed

    def read(self) -> dict[str, bytes]:
        stored = self._load()
        names = frozenset(stored) if self._managed is None else self._managed
        return {name: stored.get(name, "").encode("ascii", "replace") for name in names}

    def write(self, name: str, bundle: bytes) -> None:
        stored = self._load()
        managed = frozenset(stored) if self._managed is None else self._managed
        if name not in managed:
            raise RotationError(f"refusing to write the caBundle of unmanaged configuration {name}")
        stored[name] = bundle.decode("ascii")
        text = json.dumps(stored, indent=2, sort_keys=True) + "\n"
        try:
            atomic_write(self.path, text.encode())
        except OSError as error:
            raise CertificateError(
                f"cannot write the bundles file {self.path}: {os_reason(error)}"
            ) from error
