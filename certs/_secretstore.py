"""A kubernetes.io/tls Secret as the certificate directory a rotation works on.

In a cluster the certificate lives in the Secret the manager's Pods mount; the
kubelet projects its keys into each Pod's directory and ``ReloadingTLS`` picks the
new pair up on the next handshake. The rotation's logic works on a directory
(``Rotator``), so the rotator pulls the Secret into a private directory, and after
every step (``Rotator.after_step``) pushes what changed back: one PATCH of ``data``,
compare-and-swap on the resourceVersion it last saw. The Secret therefore moves
through exactly the states the directory does, one durable step at a time, and a
rotator killed between a step and its push repeats the step on its next run from
what the Secret holds (nothing it published depends on a file it did not push).

The Secret is the rotator's to create, not the chart's: a chart that issued it would
render a new key on every ``helm template`` (and GitOps would never settle), or read
the live one back with ``lookup`` (which GitOps tools cannot). ``create`` writes the
first certificates in one request; a second rotator racing it finds the Secret there
and carries on with what the first one wrote.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from certs._errors import RotationError
from certs._files import (
    CA_CERT,
    CA_KEY,
    PRIVATE_FILES,
    STATE_FILE,
    TLS_CERT,
    TLS_KEY,
    atomic_write,
    read_optional,
    remove_durably,
)
from jobclaim.apiserver import SECRETS, AlreadyExists, ApiClient, ApiError, Conflict, NotFound

__all__ = ["SECRET_KEYS", "SecretDirectory"]

# The keys a rotation reads and writes; a Secret key may not hold a "/".
SECRET_KEYS: Final = (CA_CERT, CA_KEY, TLS_CERT, TLS_KEY, STATE_FILE)


class SecretDirectory:
    """``directory`` kept level with the Secret ``namespace/name``."""

    def __init__(self, api: ApiClient, namespace: str, name: str, directory: Path) -> None:
        self._api = api
        self.namespace, self.name, self.directory = namespace, name, directory
        self._version = ""
        self._seen: dict[str, bytes] = {}

    def __str__(self) -> str:
        return f"Secret {self.namespace}/{self.name}"

    def exists(self) -> bool:
        try:
            self._api.get(SECRETS, self.namespace, self.name)
        except NotFound:
            return False
        except ApiError as error:
            raise RotationError(f"cannot read {self}: {error}") from error
        return True

    def create(self, files: Mapping[str, bytes], labels: Mapping[str, str]) -> bool:
        """Create the Secret holding ``files``; False when it already exists (then
        nothing is written: the existing certificate is the one the cluster trusts)."""
        secret = {
            "metadata": {"name": self.name, "labels": dict(labels)},
            "type": "kubernetes.io/tls",
            "data": {key: base64.b64encode(value).decode("ascii") for key, value in files.items()},
        }
        try:
            self._api.create(SECRETS, self.namespace, secret)
        except AlreadyExists:
            return False
        except ApiError as error:
            raise RotationError(f"cannot create {self}: {error}") from error
        return True

    def pull(self) -> None:
        """Write the Secret's keys into the directory; a key it lacks is removed."""
        try:
            secret = self._api.get(SECRETS, self.namespace, self.name)
        except NotFound as error:
            raise RotationError(f"{self} does not exist: issue the first certificate") from error
        except ApiError as error:
            raise RotationError(f"cannot read {self}: {error}") from error
        data = secret.get("data") or {}
        self._version = str(secret.get("metadata", {}).get("resourceVersion") or "")
        self._seen = {}
        for key in SECRET_KEYS:
            path = self.directory / key
            encoded = data.get(key)
            if encoded is None:
                if path.exists():
                    remove_durably(path)
                continue
            try:
                value = base64.b64decode(encoded, validate=True)
            except (binascii.Error, ValueError) as error:
                raise RotationError(f"{self} key {key} is not base64") from error
            atomic_write(path, value, private=key in PRIVATE_FILES)
            self._seen[key] = value

    def push(self) -> bool:
        """PATCH the keys that changed in the directory since the last pull or push, at
        the resourceVersion last seen; whether anything was written."""
        changes: dict[str, str | None] = {}
        current: dict[str, bytes] = {}
        for key in SECRET_KEYS:
            value = read_optional(self.directory / key)
            if value is not None:
                current[key] = value
            if value != self._seen.get(key):
                changes[key] = base64.b64encode(value).decode("ascii") if value else None
        if not changes:
            return False
        try:
            written = self._api.patch_fields(
                SECRETS,
                self.namespace,
                self.name,
                {"data": changes},
                resource_version=self._version,
            )
        except Conflict as error:
            raise RotationError(
                f"{self} changed while the rotation wrote it; run the rotation again"
            ) from error
        except ApiError as error:
            raise RotationError(f"cannot write {self}: {error}") from error
        self._version = str(written.get("metadata", {}).get("resourceVersion") or "")
        self._seen = current
        return True
