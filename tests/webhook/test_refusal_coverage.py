"""Every refusal sentence the registry holds is produced by some test: a row of a
table, or a named test where a sentence needs a request no scene can express (a body
that is not JSON, a read that fails). A sentence nobody produces is either dead code
or an untested path; both fail here."""

from __future__ import annotations

import importlib
from pathlib import Path

from tests.webhook.tables import Row
from webhook import REGISTRY, Refusal
from webhook import controllerwrite as cw
from webhook import jobauthority as ja
from webhook import objects as o
from webhook import review as r

HERE = Path(__file__).resolve().parent
# Sentences covered by named tests rather than table rows: module -> test name.
ELSEWHERE: dict[Refusal, tuple[str, str]] = {
    ja.NO_PINS: ("test_job_authority", "test_a_webhook_configured_without_pins_admits_no_job"),
    r.TOO_LARGE: ("test_identity_and_decoding", "test_what_is_not_a_review_is_a_400"),
    r.NOT_JSON: ("test_identity_and_decoding", "test_what_is_not_a_review_is_a_400"),
    r.TOO_DEEP: ("test_identity_and_decoding", "test_what_is_not_a_review_is_a_400"),
    r.NOT_A_REVIEW: ("test_identity_and_decoding", "test_what_is_not_a_review_is_a_400"),
    r.DUPLICATE: ("test_identity_and_decoding", "test_a_duplicate_key_anywhere_is_a_400_naming_it"),
    r.NO_UID: ("test_identity_and_decoding", "test_a_review_without_a_request_uid_is_a_400"),
    o.NO_OBJECT: ("test_identity_and_decoding", "test_a_create_without_an_object_is_malformed"),
    o.READ_FAILED: ("test_reads_and_failures", "test_any_failed_read_at_any_step_answers_500"),
    o.DEFECT: ("test_reads_and_failures", "test_a_defect_inside_a_rule_answers_500"),
    cw.CONFIGMAP_VERBS: ("test_identity_and_decoding", "test_every_other_verb_is_refused_by_name"),
    cw.CHUNK_VERBS: ("test_identity_and_decoding", "test_every_other_verb_is_refused_by_name"),
    cw.SCHEMA_PLAN_VERBS: (
        "test_identity_and_decoding",
        "test_every_other_verb_is_refused_by_name",
    ),
    cw.MIGRATION_PLAN_VERBS: (
        "test_identity_and_decoding",
        "test_every_other_verb_is_refused_by_name",
    ),
    o.STORED_UNDECODABLE: (
        "test_reads_and_failures",
        "test_a_stored_owner_this_code_cannot_read_is_refused",
    ),
}


def rows() -> list[Row]:
    found: list[Row] = []
    for path in sorted(HERE.glob("test_*.py")):
        module = importlib.import_module(f"tests.webhook.{path.stem}")
        for name, value in vars(module).items():
            if name.endswith("ROWS") and isinstance(value, list):
                found += [row for row in value if isinstance(row, Row)]
    return found


def test_every_registered_sentence_is_produced_by_a_test() -> None:
    registered = {refusal for rule in REGISTRY.values() for refusal in rule.refusals}
    by_rows = {row.refusal for row in rows() if row.refusal is not None}
    for module, test in ELSEWHERE.values():
        assert hasattr(importlib.import_module(f"tests.webhook.{module}"), test), test
    missing = registered - by_rows - set(ELSEWHERE)
    assert not missing, sorted(refusal.template for refusal in missing)


def test_every_table_starts_with_an_admitted_control_row() -> None:
    for path in sorted(HERE.glob("test_*.py")):
        module = importlib.import_module(f"tests.webhook.{path.stem}")
        for name, value in vars(module).items():
            if name.endswith("ROWS") and isinstance(value, list) and value:
                assert isinstance(value[0], Row) and value[0].refusal is None, (path.stem, name)
