"""The rotation's trust, published where the API server reads it: the `caBundle` of
every webhook in each managed ValidatingWebhookConfiguration and
MutatingWebhookConfiguration.

Writes are a PATCH (the verb the rotator's RBAC grants; it has no `update`), and
compare-and-swap on the configuration's resourceVersion: a concurrent `helm upgrade`
that rewrote the configuration makes the write fail with a sentence instead of
silently undoing either change, and the rotation simply runs again.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from typing import Any

from certs._errors import RotationError
from jobclaim.apiserver import (
    MUTATING_WEBHOOK_CONFIGURATIONS,
    VALIDATING_WEBHOOK_CONFIGURATIONS,
    ApiClient,
    ApiError,
    Conflict,
    NotFound,
    Resource,
)

__all__ = ["KubeBundles", "bundle_of"]


def bundle_of(configuration: dict[str, Any]) -> bytes:
    """The one caBundle every webhook of ``configuration`` trusts, or b"" if they differ.

    Disagreeing entries read as empty so the rotation rewrites all of them: an entry
    left on an old bundle would stop trusting the server once the old CA is dropped.
    """
    webhooks = configuration.get("webhooks") or []
    bundles = {str((w.get("clientConfig") or {}).get("caBundle", "")) for w in webhooks}
    if len(bundles) != 1:
        return b""
    (encoded,) = bundles
    try:
        return base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        return b""


class KubeBundles:
    """`WebhookBundles` over the API server, for the named configurations only:
    ``managed`` validating ones and ``mutating`` ones (each name unique across both)."""

    def __init__(
        self, api: ApiClient, managed: Sequence[str], mutating: Sequence[str] = ()
    ) -> None:
        if not managed and not mutating:
            raise ValueError("at least one managed webhook configuration must be named")
        self._api = api
        self._kinds: dict[str, Resource] = dict.fromkeys(managed, VALIDATING_WEBHOOK_CONFIGURATIONS)
        for name in mutating:
            if name in self._kinds:
                raise ValueError(f"{name} is named both validating and mutating")
            self._kinds[name] = MUTATING_WEBHOOK_CONFIGURATIONS
        self._managed = tuple(self._kinds)

    def missing(self) -> list[str]:
        """The managed configurations that do not exist (yet)."""
        absent: list[str] = []
        for name in self._managed:
            try:
                self._api.get(self._kinds[name], None, name)
            except NotFound:
                absent.append(name)
            except ApiError as error:
                raise RotationError(f"cannot read webhook configuration {name}: {error}") from error
        return absent

    def read(self) -> dict[str, bytes]:
        found: dict[str, bytes] = {}
        for name in self._managed:
            try:
                configuration = self._api.get(self._kinds[name], None, name)
            except NotFound:
                continue
            except ApiError as error:
                raise RotationError(f"cannot read webhook configuration {name}: {error}") from error
            found[name] = bundle_of(configuration)
        return found

    def write(self, name: str, bundle: bytes) -> None:
        if name not in self._managed:
            raise RotationError(f"refusing to write the caBundle of unmanaged configuration {name}")
        kind = self._kinds[name]
        try:
            configuration = self._api.get(kind, None, name)
            encoded = base64.b64encode(bundle).decode("ascii")
            webhooks = configuration.get("webhooks") or []
            for webhook in webhooks:
                webhook.setdefault("clientConfig", {})["caBundle"] = encoded
            # A merge patch replaces the list whole: the list as read, bundles changed,
            # at the version read, so nothing written meanwhile is undone.
            version = str(configuration.get("metadata", {}).get("resourceVersion") or "")
            self._api.patch_fields(
                kind, None, name, {"webhooks": webhooks}, resource_version=version
            )
        except Conflict as error:
            raise RotationError(
                f"webhook configuration {name} changed while its caBundle was written; "
                "run the rotation again"
            ) from error
        except ApiError as error:
            raise RotationError(f"cannot write the caBundle of {name}: {error}") from error
