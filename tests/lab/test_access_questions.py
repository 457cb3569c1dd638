"""``lab.run.access_questions``: what ``until_granted`` asks RBAC before it says a grant is
in force. A question left out would let a test run before that verb is allowed, which is
the 403 flake ``until_granted`` exists to prevent."""

from __future__ import annotations

import pytest

from jobclaim.apiserver import Object
from lab.run import LEASE_RULES, MANAGER_RULES, access_questions


def test_every_group_resource_verb_and_name_is_one_question() -> None:
    rules: list[Object] = [
        {
            "apiGroups": ["", "batch"],
            "resources": ["jobs", "ptahschemas/status"],
            "resourceNames": ["a", "b"],
            "verbs": ["get", "patch"],
        }
    ]
    questions = access_questions(rules, "ns")
    assert len(questions) == 2 * 2 * 2 * 2
    assert {
        "group": "batch",
        "resource": "ptahschemas",
        "subresource": "status",
        "verb": "patch",
        "name": "b",
        "namespace": "ns",
    } in questions
    assert len({tuple(sorted(q.items())) for q in questions}) == len(questions)


def test_a_cluster_wide_grant_names_no_namespace() -> None:
    rules: list[Object] = [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]
    assert access_questions(rules, None) == [
        {"group": "", "resource": "pods", "subresource": "", "verb": "get", "name": ""}
    ]


def test_the_managers_grant_is_asked_about_in_full() -> None:
    asked = {(q["group"], q["resource"], q["verb"]) for q in access_questions(MANAGER_RULES, None)}
    granted = {
        (group, plural.partition("/")[0], verb)
        for rule in MANAGER_RULES
        for group in rule["apiGroups"]
        for plural in rule["resources"]
        for verb in rule["verbs"]
    }
    assert asked == granted
    assert all(
        q["namespace"] == "ptah-system" for q in access_questions(LEASE_RULES, "ptah-system")
    )


@pytest.mark.parametrize(
    "rule",
    [
        {"nonResourceURLs": ["/healthz"], "verbs": ["get"]},
        {"apiGroups": [""], "resources": [], "verbs": ["get"]},
    ],
    ids=["non-resource", "no-resources"],
)
def test_a_rule_it_cannot_ask_about_is_refused(rule: Object) -> None:
    with pytest.raises(ValueError, match="only resource rules can be asked about"):
        access_questions([rule], None)
