"""OCI against a real registry on loopback (go-containerregistry's ``crane registry
serve``, built by ``make crane``): resolve, inspect, verify with a digest pin, pull."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lab.executor.documents import MIGRATIONS_ARTIFACT_TYPE, SCHEMA_ARTIFACT_TYPE
from lab.executor.migrations import read_directory, sum_text
from lab.executor.oci import push_artifact
from tests.labexecutor.labkit import Lab

pytestmark = [pytest.mark.postgres, pytest.mark.registry]

SCHEMA = b"create table users (id bigint primary key, email text not null unique);\n"


def test_resolve_inspect_verify_and_pull_a_schema(lab: Lab, registry: str) -> None:
    digest = push_artifact(
        f"{registry}/shop/schema:v1", SCHEMA_ARTIFACT_TYPE, [("schema.sql", SCHEMA)]
    )
    ref = f"oci://{registry}/shop/schema:v1"
    resolved = lab.ptah("oci", "resolve", ref, "--format", "json")
    report = json.loads(resolved.stdout)
    assert resolved.code == 0
    assert report == {
        "reference": ref,
        "pinned_reference": f"oci://{registry}/shop/schema@{digest}",
        "digest": digest,
        "media_type": "application/vnd.oci.image.manifest.v1+json",
        "size": report["size"],
    }
    pinned = report["pinned_reference"]
    inspected = json.loads(
        lab.ptah("oci", "inspect", pinned, "--format", "json", "--no-referrers").stdout
    )
    assert (inspected["artifact_type"], inspected["digest"]) == (SCHEMA_ARTIFACT_TYPE, digest)

    policy = lab.work / "policy.yaml"
    policy.write_text("version: 1\nrequire_digest_pin: true\n")
    verified = lab.ptah("oci", "verify", pinned, "--policy", str(policy), "--format", "json")
    assert verified.code == 0
    assert json.loads(verified.stdout) == {
        "reference": pinned,
        "digest": digest,
        "satisfied": ["require_digest_pin"],
        "findings": [],
    }
    by_tag = lab.ptah("oci", "verify", ref, "--policy", str(policy), "--format", "json")
    assert (
        by_tag.code == 1
        and json.loads(by_tag.stdout)["findings"][0]["requirement"] == "require_digest_pin"
    )

    out = lab.work / "schema.sql"
    assert lab.ptah("schema", "pull", pinned, "--out", str(out)).code == 0
    assert out.read_bytes() == SCHEMA
    # The pulled file is a desired schema the engine plans from.
    plan = lab.ptah(
        "schema",
        "plan",
        "--output",
        str(lab.work / "p.json"),
        "--json",
        env=lab.env(PTAH_SCHEMA_FILE=str(out)),
    )
    assert plan.code == 0 and json.loads(plan.stdout)["outcome"] == "changes"


def test_pull_migrations_then_run_them(lab: Lab, registry: str) -> None:
    files = {
        "1_users.sql": b"create table users (id int primary key);",
        "2_name.sql": b"alter table users add column name text;",
    }
    files["ptah.sum"] = sum_text(files).encode()
    digest = push_artifact(
        f"{registry}/shop/migrations:v1", MIGRATIONS_ARTIFACT_TYPE, sorted(files.items())
    )
    out = lab.work / "source" / "migrations"
    pulled = lab.ptah(
        "migrations", "pull", f"{registry}/shop/migrations@{digest}", "--out", str(out)
    )
    assert pulled.code == 0, pulled
    assert [m.version for m in read_directory(out)] == [1, 2]
    run = lab.ptah("migrations", "up", "--migrations-dir", str(out), "--json")
    assert run.code == 0 and json.loads(run.stdout)["applied"] == [1, 2]


@pytest.mark.parametrize(
    ("policy", "message"),
    [
        ("version: 1\nrequire_digest_pin: true\n", None),
        (
            "version: 1\nrequire_digest_pin: true\nrequire_signature: true\n",
            "supports one policy kind only",
        ),
        (
            "version: 1\nartifact_types: [x]\nrequire_digest_pin: true\n",
            "supports one policy kind only",
        ),
        ("version: 1\nrequire_digest_pin: false\n", "declares no requirement"),
        ("version: 2\nrequire_digest_pin: true\n", "must say version: 1"),
        ("version: 1\nrequire_digest_pin: true\nsurprise: 1\n", "unknown field surprise"),
        ("[1, 2]", "not a yaml mapping"),
    ],
)
def test_verify_supports_one_policy_kind(
    lab: Lab, registry: str, policy: str, message: str | None
) -> None:
    digest = push_artifact(
        f"{registry}/shop/schema:p", SCHEMA_ARTIFACT_TYPE, [("schema.sql", SCHEMA)]
    )
    path = lab.work / "policy.yaml"
    path.write_text(policy)
    result = lab.ptah(
        "oci",
        "verify",
        f"{registry}/shop/schema@{digest}",
        "--policy",
        str(path),
        "--format",
        "json",
    )
    if message is None:
        assert result.code == 0
        return
    assert result.code == 2 and message in result.stderr and result.stdout == ""


def test_malformed_artifacts_are_refused(lab: Lab, registry: str) -> None:
    two = push_artifact(
        f"{registry}/bad/two:v1", SCHEMA_ARTIFACT_TYPE, [("a.sql", b"x"), ("b.sql", b"y")]
    )
    wrong = push_artifact(f"{registry}/bad/wrong:v1", MIGRATIONS_ARTIFACT_TYPE, [("1_a.sql", b"x")])
    escape = push_artifact(
        f"{registry}/bad/escape:v1", MIGRATIONS_ARTIFACT_TYPE, [("../1_a.sql", b"x")]
    )
    rows = [
        (
            ["schema", "pull", f"{registry}/bad/two@{two}", "--out", str(lab.work / "s.sql")],
            "exactly one",
        ),
        (
            ["schema", "pull", f"{registry}/bad/wrong@{wrong}", "--out", str(lab.work / "s.sql")],
            "not application/vnd.stokaro.ptah.schema.v1",
        ),
        (
            ["migrations", "pull", f"{registry}/bad/escape@{escape}", "--out", str(lab.work / "m")],
            "plain, unique file title",
        ),
        (
            ["schema", "pull", f"{registry}/bad/none:v9", "--out", str(lab.work / "s.sql")],
            "answered 404",
        ),
        (
            ["oci", "resolve", f"{registry}/bad/two@sha256:{'0' * 64}", "--format", "json"],
            "answered 404",
        ),
    ]
    for argv, message in rows:
        result = lab.ptah(*argv)
        assert result.code == 2 and message in result.stderr, (argv, result)
    assert not (lab.work / "s.sql").exists() and not (Path(lab.work) / "m").exists()
