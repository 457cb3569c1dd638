"""A StateReader whose reads of one kind raise a chosen error: how the webhook tests make
a read fail (the failure tables, the fuzz)."""

from __future__ import annotations

from typing import Any

from jobclaim.apiserver import Resource
from webhook import StateReader


class Failing(StateReader):
    """A StateReader whose reads of one kind raise ``error``."""

    def __init__(self, objects: Any, kind: str, error: Exception) -> None:
        super().__init__(objects)
        self.kind, self.error = kind, error

    def get_text(self, resource: Resource, namespace: str | None, name: str) -> bytes:
        if resource.kind == self.kind:
            raise self.error
        return super().get_text(resource, namespace, name)
