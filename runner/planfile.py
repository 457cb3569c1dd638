"""The approved plan: rebuilt from its projected chunks, checked, and read.

The controller splits an approved plan into ConfigMaps (``<plan>-000``, ``-001``, …),
and the Apply Pod mounts them under one directory, one file per chunk. Before ptah
may run anything the runner rebuilds the bytes itself and holds them to the digest
the approval was given for:

* the entries are sorted by name, and dotfiles are skipped (a projected volume keeps
  its real files under ``..data`` and timestamped dot-directories);
* every symlink must resolve inside the directory: a link out of it would make the
  runner read bytes nobody projected;
* the total is bounded, and the bytes must be UTF-8 (ptah reads JSON);
* the SHA-256 of the concatenation must be the expected content digest.

Then the plan document is decoded strictly (unknown fields refused: this is the
document that decides what SQL runs) and its dialect matched against the claim's
engine. Only then is it written to the file ``schema apply --plan`` reads.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Annotated, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from runner.result import first_problem, strict_json

MAX_PLAN_BYTES: Final = 8 * 1024 * 1024
MAX_CHUNKS: Final = 64
DIALECTS: Final[dict[str, frozenset[str]]] = {
    "PostgreSQL": frozenset({"postgres", "postgresql"}),
    "MySQL": frozenset({"mysql", "mariadb"}),
}


class PlanRefused(ValueError):
    """The projected plan is not the approved plan; ``code`` names why."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def dialect_matches(engine: str, dialect: str) -> bool:
    return dialect.strip().lower() in DIALECTS.get(engine, frozenset())


def _inside(root: Path, entry: Path) -> bool:
    try:
        entry.resolve(strict=True).relative_to(root)
    except (OSError, ValueError):
        return False
    return True


def reconstruct(directory: str, expected_digest: str, *, limit: int = MAX_PLAN_BYTES) -> bytes:
    """The approved plan's bytes from its chunk files, or ``PlanRefused``."""
    try:
        root = Path(directory).resolve(strict=True)
        names = sorted(e.name for e in root.iterdir() if not e.name.startswith("."))
    except OSError as error:
        raise PlanRefused(
            "plan_unreadable", f"the plan directory cannot be read: {error.strerror}"
        ) from None
    if not names:
        raise PlanRefused("plan_unreadable", "the plan directory holds no chunk")
    if len(names) > MAX_CHUNKS:
        raise PlanRefused(
            "plan_too_large", f"the plan directory holds more than {MAX_CHUNKS} chunks"
        )
    data = bytearray()
    for name in names:
        entry = root / name
        if not _inside(root, entry):
            raise PlanRefused(
                "plan_unreadable", f"the plan chunk {name} leads out of its directory"
            )
        if not entry.is_file():
            raise PlanRefused("plan_unreadable", f"the plan chunk {name} is not a file")
        with entry.open("rb") as chunk:
            data += chunk.read(limit - len(data) + 1)
        if len(data) > limit:
            raise PlanRefused("plan_too_large", f"the plan is larger than {limit} bytes")
    content = bytes(data)
    try:
        content.decode("utf-8")
    except UnicodeDecodeError:
        raise PlanRefused("plan_not_utf8", "the plan is not UTF-8") from None
    if "sha256:" + hashlib.sha256(content).hexdigest() != expected_digest:
        raise PlanRefused(
            "plan_digest_mismatch", "the projected plan is not the plan the approval was given for"
        )
    return content


class PlanStatement(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    sql: Annotated[str, StringConstraints(min_length=1, pattern=r"\S")]
    severity: Literal["safe", "info", "warning", "error", "destructive"]
    reason: str


class PlanDocument(BaseModel):
    """ptah's saved plan file, format version 1."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    format_version: Literal[1]
    name: Annotated[str, StringConstraints(min_length=1, pattern=r"\S")]
    dialect: str
    from_fingerprint: Annotated[str, StringConstraints(min_length=1, pattern=r"\S")]
    to_fingerprint: Annotated[str, StringConstraints(min_length=1, pattern=r"\S")]
    exclude: list[str] = Field(default_factory=list)
    destructive: bool = False
    statements: list[PlanStatement] = Field(min_length=1)

    @property
    def any_destructive(self) -> bool:
        return self.destructive or any(s.severity == "destructive" for s in self.statements)


def decode_plan(content: bytes, engine: str) -> PlanDocument:
    """The plan document in ``content``, or ``PlanRefused``."""
    try:
        plan = PlanDocument.model_validate(strict_json(content))
    except ValidationError as error:
        raise PlanRefused(
            "plan_invalid", f"the plan is not a ptah plan: {first_problem(error)}"
        ) from None
    except ValueError as error:
        raise PlanRefused("plan_invalid", f"the plan is not one JSON document: {error}") from None
    if not dialect_matches(engine, plan.dialect):
        raise PlanRefused(
            "dialect_mismatch",
            f"the plan is for {plan.dialect!r}, and the claim's engine is {engine}",
        )
    return plan


def write_private(path: str, content: bytes) -> None:
    """Write a file only this user can read, refusing to follow or reuse a name."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        view = memoryview(content)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)
