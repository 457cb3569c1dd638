"""The command line: ptah's command tree, flags, environment twins and exit codes.

Every flag has a ``PTAH_<FLAG>`` twin (hyphens become underscores) that applies when the
flag is not on argv; the flag wins. ``schema apply --auto-approve`` alone has no twin: an
approval must be on argv, never inherited from an environment. List flags take CSV in
both spellings, as ptah's do.

Exit codes: 0 success, 1 an expected negative result (drift, a verification finding),
2 a usage or runtime error, 128+N interrupted by signal N. Stdout carries only the
document; sentences for people go to stderr.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import IO, Any, NoReturn

from pydantic import BaseModel

from lab.executor import IDENTITY, VERSION, interrupt, migrations, oci, schema
from lab.executor.db import ExecutorError, parse_duration
from lab.executor.documents import ApplyReport, MigrationRun, PlanReport, render
from lab.executor.interrupt import Interrupted

USAGE = 2


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message}")

    def print_help(self, file: Any = None) -> None:
        super().print_help(sys.stderr)


@dataclass(frozen=True)
class Flag:
    name: str
    kind: str = "str"  # str | bool | list
    default: str | None = None
    env: bool = True
    help: str = ""
    # Other spellings ptah accepts on argv (``--save`` for ``--output``); the env twin is
    # the canonical name's.
    aliases: tuple[str, ...] = ()

    @property
    def dest(self) -> str:
        return self.name.replace("-", "_")

    @property
    def env_name(self) -> str:
        return "PTAH_" + self.dest.upper()


DB_URL = Flag("db-url", help="target database url")
DEV_URL = Flag("dev-url", help="dev database url (scratch schemas are made and rolled back there)")
SCHEMA_FILE = Flag("schema-file", "list", help="desired schema as sql ddl (repeatable)")
EXCLUDE = Flag("exclude", "list", help="table name patterns to leave alone (repeatable)")
CONNECT_TIMEOUT = Flag("connect-timeout", default="10s")
LOCK_TIMEOUT = Flag("lock-timeout", default="30s")
JSON = Flag("json", "bool", help="print the contract document")
PLAIN_HTTP = Flag("plain-http", "bool", help="talk http to the registry (loopback hosts always do)")
FORMAT = Flag("format", default="text", help="text or json")

COMMANDS: dict[tuple[str, str], tuple[list[Flag], bool]] = {
    # (noun, verb): (flags, takes a REF positional)
    ("schema", "plan"): (
        [
            DB_URL,
            DEV_URL,
            SCHEMA_FILE,
            EXCLUDE,
            Flag("protected-table", "list"),
            Flag("name", default="schema"),
            Flag("output", aliases=("save",)),
            JSON,
            CONNECT_TIMEOUT,
        ],
        False,
    ),
    ("schema", "apply"): (
        [
            DB_URL,
            Flag("plan"),
            Flag("auto-approve", "bool", env=False),
            JSON,
            Flag("dry-run", "bool"),
            Flag("tx-mode", default="all"),
            LOCK_TIMEOUT,
            CONNECT_TIMEOUT,
            Flag("require-approval"),
        ],
        False,
    ),
    ("schema", "drift"): (
        [
            DB_URL,
            DEV_URL,
            SCHEMA_FILE,
            EXCLUDE,
            FORMAT,
            Flag("severity", default="safe"),
            CONNECT_TIMEOUT,
        ],
        False,
    ),
    ("schema", "pull"): ([Flag("out"), PLAIN_HTTP], True),
    ("migrations", "status"): ([DB_URL, Flag("migrations-dir"), JSON, CONNECT_TIMEOUT], False),
    ("migrations", "up"): (
        [
            DB_URL,
            Flag("migrations-dir"),
            JSON,
            Flag("expect-sequence"),
            Flag("tx-mode", default="file"),
            LOCK_TIMEOUT,
            CONNECT_TIMEOUT,
        ],
        False,
    ),
    ("migrations", "pull"): ([Flag("out"), PLAIN_HTTP], True),
    ("migrations", "hash"): ([Flag("migrations-dir")], False),
    ("oci", "resolve"): ([FORMAT, PLAIN_HTTP], True),
    ("oci", "verify"): ([Flag("policy"), FORMAT, PLAIN_HTTP], True),
    ("oci", "inspect"): ([FORMAT, Flag("no-referrers", "bool"), PLAIN_HTTP], True),
}


def _parser() -> _Parser:
    root = _Parser(prog="ptah", description=f"{IDENTITY} (not ptah)")
    nouns = root.add_subparsers(dest="noun", required=True, parser_class=_Parser)
    nouns.add_parser("version", help="say what this program is")
    groups: dict[str, Any] = {}
    for (noun, verb), (flags, has_ref) in COMMANDS.items():
        if noun not in groups:
            groups[noun] = nouns.add_parser(noun).add_subparsers(
                dest="verb", required=True, parser_class=_Parser
            )
        command = groups[noun].add_parser(verb, prog=f"ptah {noun} {verb}")
        if has_ref:
            command.add_argument("ref", metavar="REF")
        for flag in flags:
            if flag.kind == "bool":
                command.add_argument(
                    f"--{flag.name}",
                    dest=flag.dest,
                    action="store_const",
                    const=True,
                    default=None,
                    help=flag.help,
                )
            elif flag.kind == "list":
                command.add_argument(
                    f"--{flag.name}", dest=flag.dest, action="append", default=None, help=flag.help
                )
            else:
                names = [f"--{flag.name}", *(f"--{alias}" for alias in flag.aliases)]
                command.add_argument(*names, dest=flag.dest, default=None, help=flag.help)
    return root


def _bool(text: str, name: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("1", "true", "yes"):
        return True
    if lowered in ("", "0", "false", "no"):
        return False
    raise UsageError(f"{name}={text!r} is not a boolean (true or false)")


def _csv(values: list[str]) -> tuple[str, ...]:
    return tuple(part.strip() for value in values for part in value.split(",") if part.strip())


def resolve_flags(
    flags: list[Flag], parsed: argparse.Namespace, env: Mapping[str, str]
) -> dict[str, Any]:
    """Each flag's value: argv first, then its env twin, then its default."""
    values: dict[str, Any] = {}
    for flag in flags:
        given = getattr(parsed, flag.dest)
        from_env = env.get(flag.env_name) if flag.env else None
        if flag.kind == "bool":
            values[flag.dest] = (
                bool(given) if given is not None else _bool(from_env or "", flag.env_name)
            )
        elif flag.kind == "list":
            values[flag.dest] = _csv(given) if given is not None else _csv([from_env or ""])
        else:
            values[flag.dest] = given if given is not None else (from_env or flag.default)
    return values


def main(argv: list[str], env: Mapping[str, str], stdout: IO[str], stderr: IO[str]) -> int:
    if argv == ["--version"]:
        # The spelling a person tries first, and the one an image check uses: it must
        # say the same stand-in words as `ptah version`, never pass for the real ptah.
        argv = ["version"]
    try:
        parsed = _parser().parse_args(argv)
    except UsageError as error:
        print(_sentence(str(error)), file=stderr)
        return USAGE
    except SystemExit as done:  # --help
        return int(done.code or 0)
    if parsed.noun == "version":
        stdout.write(f"{IDENTITY} {VERSION}\n")
        return 0
    flags, _ = COMMANDS[(parsed.noun, parsed.verb)]
    failure: Callable[[str], BaseModel] | None = None
    try:
        values = resolve_flags(flags, parsed, env)
        if hasattr(parsed, "ref"):
            values["ref"] = parsed.ref
        failure = _failure_document(parsed.noun, parsed.verb, values)
        document, code = _dispatch(parsed.noun, parsed.verb, values, env)
    except UsageError as error:
        print(_sentence(str(error)), file=stderr)
        return USAGE
    except ExecutorError as error:
        sentence = _sentence(str(error))
        if failure is not None:
            stdout.write(render(failure(sentence)))
        print(sentence, file=stderr)
        return USAGE
    except Interrupted as stop:
        if (parsed.noun, parsed.verb) == ("schema", "apply") and failure is not None:
            stdout.write(
                render(
                    ApplyReport(outcome="canceled", error="interrupted before any statement ran")
                )
            )
        print(f"ptah: {stop}", file=stderr)
        return stop.exit_code
    if isinstance(document, BaseModel):
        stdout.write(render(document))
    else:
        stdout.write(document)
    return code


def _sentence(text: str) -> str:
    text = " ".join(text.split())
    return text[:1].lower() + text[1:]


def _failure_document(
    noun: str, verb: str, values: Mapping[str, Any]
) -> Callable[[str], BaseModel] | None:
    """The document a --json command prints when it fails before it has its own."""
    if not values.get("json"):
        return None
    if (noun, verb) == ("schema", "plan"):
        return lambda sentence: PlanReport(outcome="failed", error=sentence)
    if (noun, verb) == ("schema", "apply"):
        return lambda sentence: ApplyReport(outcome="failed", error=sentence)
    if (noun, verb) == ("migrations", "up"):
        return lambda sentence: MigrationRun(
            outcome="failed", planned=[], applied=[], error=sentence
        )
    return None


def _need(values: Mapping[str, Any], key: str, sentence: str) -> str:
    value = values.get(key)
    if not value:
        raise ExecutorError(sentence)
    return str(value)


def _target(values: Mapping[str, Any], command: str) -> schema.Target:
    url = _need(
        values, "db_url", f"{command} needs the target database: set --db-url or PTAH_DB_URL"
    )
    return schema.Target(url, parse_duration(values["connect_timeout"], "connect-timeout"))


def _dev(values: Mapping[str, Any], command: str) -> schema.Target:
    url = _need(values, "dev_url", f"{command} needs a dev database: set --dev-url or PTAH_DEV_URL")
    return schema.Target(url, parse_duration(values["connect_timeout"], "connect-timeout"))


def _migrations_dir(values: Mapping[str, Any], command: str) -> str:
    return _need(values, "migrations_dir", f"{command} needs --migrations-dir DIR")


def _format(values: Mapping[str, Any]) -> bool:
    fmt = str(values["format"]).lower()
    if fmt not in ("text", "json"):
        raise UsageError(f"--format {values['format']!r} is neither text nor json")
    return fmt == "json"


def _dispatch(
    noun: str, verb: str, values: dict[str, Any], env: Mapping[str, str]
) -> tuple[BaseModel | str, int]:
    command = f"{noun} {verb}"
    if (noun, verb) == ("schema", "plan"):
        return schema.plan(
            target=_target(values, command),
            dev=_dev(values, command),
            schema_files=values["schema_file"],
            exclude=values["exclude"],
            protected=values["protected_table"],
            name=values["name"],
            output=values["output"],
        )
    if (noun, verb) == ("schema", "apply"):
        if not values["auto_approve"]:
            raise UsageError(
                "schema apply runs only with --auto-approve on the command line "
                "(it has no environment twin)"
            )
        if values["require_approval"]:
            raise ExecutorError(
                "--require-approval (signed approvals) is outside the lab executor's scope"
            )
        return schema.apply(
            target=_target(values, command),
            plan_path=_need(values, "plan", "schema apply needs --plan FILE"),
            dry_run=values["dry_run"],
            tx_mode=values["tx_mode"],
            lock_timeout=parse_duration(values["lock_timeout"], "lock-timeout"),
        )
    if (noun, verb) == ("schema", "drift"):
        as_json = _format(values)
        report, code = schema.drift(
            target=_target(values, command),
            dev=_dev(values, command),
            schema_files=values["schema_file"],
            exclude=values["exclude"],
            threshold=values["severity"],
        )
        return (report if as_json else _drift_text(report.model_dump())), code
    if (noun, verb) == ("migrations", "status"):
        return migrations.status(
            target=_target(values, command),
            directory=_migrations_dir(values, command),
        )
    if (noun, verb) == ("migrations", "up"):
        return migrations.up(
            target=_target(values, command),
            directory=_migrations_dir(values, command),
            expect_sequence=values["expect_sequence"],
            tx_mode=values["tx_mode"],
            lock_timeout=parse_duration(values["lock_timeout"], "lock-timeout"),
        )
    if (noun, verb) == ("migrations", "hash"):
        return migrations.hash_directory(_migrations_dir(values, command)), 0
    plain = bool(values.get("plain_http"))
    # ptah's variable with no flag twin (its docs/oci.md): a PEM bundle trusted in
    # addition to the system roots for the registry's certificate.
    ca_file = env.get("PTAH_OCI_CA_FILE") or None
    if (noun, verb) == ("schema", "pull"):
        out = _need(values, "out", "schema pull needs --out FILE")
        return oci.pull_schema(values["ref"], out, plain, ca_file), 0
    if (noun, verb) == ("migrations", "pull"):
        out = _need(values, "out", "migrations pull needs --out DIR")
        return oci.pull_migrations(values["ref"], out, plain, ca_file), 0
    as_json = _format(values)
    if verb == "resolve":
        return oci.resolve(values["ref"], plain, as_json, ca_file), 0
    if verb == "inspect":
        return oci.inspect(values["ref"], plain, as_json, ca_file), 0
    policy = _need(
        values,
        "policy",
        "oci verify needs --policy FILE: verification with no policy would check nothing",
    )
    return oci.verify(values["ref"], policy, plain, as_json, ca_file)


def _drift_text(report: dict[str, Any]) -> str:
    if not report["drift"]:
        return "no drift\n"
    lines = [f"drift (highest severity {report['highest_severity']}):"]
    lines += [f"  {f['category']}: {f['count']} ({f['severity']})" for f in report["findings"]]
    return "\n".join(lines) + "\n"


def run() -> None:
    """The console entry point (``ptah`` in the lab's executor image)."""
    interrupt.install()
    sys.exit(main(sys.argv[1:], os.environ, sys.stdout, sys.stderr))
