"""kubectl ptah: review and decide what the operator waits on.

    kubectl ptah plan        schema|migration NAME    the pending plan, statement by statement
                             [--applied]              ... or the one the last confirmed Apply ran
    kubectl ptah approve     schema|migration NAME    show it, then approve exactly that plan
    kubectl ptah acknowledge migration NAME           settle a run nobody accounted for
    kubectl ptah settle      schema NAME --reason R   end a proof no read can finish
    kubectl ptah status      schema|migration NAME    phase, plan, claim, what is owed
    kubectl ptah completion  bash|zsh|fish            a shell completion script

Every decision is created without who made it: admission stamps the identity, the
time and the request from the request itself, and the command prints what was
stamped. ``approve`` re-reads the plan after showing it and refuses when it moved;
``--fingerprint`` pins a plan shown earlier (``plan -o json``), ``--yes`` skips the
question. ``-o json`` and ``-o yaml`` print one document for tools; ``plan schema
-o sql`` prints the plan's statements only, exactly as stored.

The shell: it reads and creates through a ``jobclaim.apiserver.ApiClient``; what to
show and whether a plan moved are the pure functions of ``kubectl_ptah.review``.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.resources
import json
import os
import ssl
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, NoReturn, TextIO

from pydantic import ValidationError

from jobclaim import STAMPED, PlanUnreadable, written_stamp
from jobclaim.api import (
    ObjectMeta,
    ObjectReference,
    PtahMigration,
    PtahMigrationApproval,
    PtahMigrationApprovalSpec,
    PtahMigrationPlan,
    PtahMigrationRunAcknowledgment,
    PtahMigrationRunAcknowledgmentSpec,
    PtahSchema,
    PtahSchemaApproval,
    PtahSchemaApprovalSpec,
    PtahSchemaPlan,
    PtahSchemaProofSettlement,
    PtahSchemaProofSettlementSpec,
)
from jobclaim.apiserver import (
    PTAHMIGRATIONAPPROVALS,
    PTAHMIGRATIONPLANS,
    PTAHMIGRATIONS,
    PTAHSCHEMAAPPROVALS,
    PTAHSCHEMAPLANCHUNKS,
    PTAHSCHEMAPLANS,
    PTAHSCHEMAS,
    ApiClient,
    ApiError,
    NotFound,
    Object,
    Resource,
    Unavailable,
)

# The API adapter; after the layout move it is kube.client, never a controller internal.
from kube.client import KubeApi, KubeConfigError
from kubectl_ptah.completion import SHELLS, script, words_of
from kubectl_ptah.errors import (
    FAILED,
    NOTHING_STORED,
    OK,
    USAGE,
    KubeconfigError,
    NotStored,
    Refused,
    Usage,
    exit_code,
    sentence,
)
from kubectl_ptah.kubeconfig import DEFAULT_NAMESPACE, Kubeconfig, load
from kubectl_ptah.render import plan_sql, plan_text, record_text, yaml_text
from kubectl_ptah.review import (
    PlanView,
    migration_plan_view,
    moved,
    schema_plan_view,
)

KINDS: Final[Mapping[str, Resource]] = {"schema": PTAHSCHEMAS, "migration": PTAHMIGRATIONS}
APPROVALS: Final[Mapping[str, Resource]] = {
    "schema": PTAHSCHEMAAPPROVALS,
    "migration": PTAHMIGRATIONAPPROVALS,
}
# Where each kind of decision is created: the stamped kinds' own table.
DECISIONS: Final[Mapping[str, Resource]] = {kind: s.resource for kind, s in STAMPED.items()}
Connect = Callable[[argparse.Namespace], ApiClient]

# Refused lives in kubectl_ptah.errors; callers that catch it here keep working.
__all__ = [
    "Connect",
    "Refused",
    "approve",
    "connect",
    "kubeconfig_of",
    "main",
    "read_applied",
    "read_plan",
    "status",
]


_DEFAULTS: Final[Mapping[str, Any]] = {
    "kubeconfig": None,
    "context": None,
    # None: the context's namespace, else "default" (main fills it in).
    "namespace": None,
    "output": "text",
    "config": None,
}


DISTRIBUTION: Final = "ptah-operator"


def version() -> str | None:
    """This plugin's version, or None when nothing records one.

    A zipapp (``kubectl_ptah.build_zipapp``) carries the version it was built from in
    ``kubectl_ptah/VERSION``, which wins: the environment that runs it may hold another
    ptah-operator, or none. Otherwise the installed distribution's metadata says.
    """
    bundled = importlib.resources.files("kubectl_ptah") / "VERSION"
    if bundled.is_file():
        return bundled.read_text(encoding="utf-8").strip() or None
    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return None


class _Version(argparse.Action):
    """``--version``: ``kubectl-ptah <version>`` on stdout, or one sentence and exit 1."""

    def __call__(self, parser: argparse.ArgumentParser, *_args: Any, **_kwargs: Any) -> None:
        found = version()
        if found is None:
            parser.exit(
                FAILED,
                f"kubectl ptah: the version is unknown: the {DISTRIBUTION} distribution "
                "is not installed\n",
            )
        sys.stdout.write(f"kubectl-ptah {found}\n")
        parser.exit(OK)


class _Parser(argparse.ArgumentParser):
    """argparse, with its usage error as one line (exit 2, as argparse exits)."""

    def error(self, message: str) -> NoReturn:
        self.exit(USAGE, f"{self.prog}: {sentence(message)}; see '{self.prog} --help'\n")


def _common() -> _Parser:
    """kubectl's own flags, accepted before the command and after it alike."""
    common = _Parser(add_help=False, argument_default=argparse.SUPPRESS)
    common.add_argument("--kubeconfig", type=Path, help="default: $KUBECONFIG, ~/.kube/config")
    common.add_argument("--context", help="kubeconfig context")
    common.add_argument("-n", "--namespace", help="default: the context's namespace, else default")
    common.add_argument(
        "-o",
        "--output",
        choices=("text", "json", "yaml", "sql"),
        help="default: text; sql: a schema plan's statements only (plan schema)",
    )
    return common


def _parser() -> argparse.ArgumentParser:
    common = _common()
    parser = _Parser(
        prog="kubectl ptah",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[common],
    )
    parser.add_argument("--version", action=_Version, nargs=0, help="print the version")
    commands = parser.add_subparsers(dest="command", required=True)
    for name, kinds, about in (
        ("plan", ("schema", "migration"), "show the pending plan"),
        ("approve", ("schema", "migration"), "approve exactly the plan shown"),
        ("acknowledge", ("migration",), "acknowledge an unresolved run"),
        ("settle", ("schema",), "settle a proof no read can finish"),
        ("status", ("schema", "migration"), "phase, plan, claim, what is owed"),
    ):
        command = commands.add_parser(name, help=about, parents=[common])
        command.add_argument("kind", choices=kinds)
        command.add_argument("name")
        if name in ("approve", "acknowledge", "settle"):
            command.add_argument("--yes", action="store_true", help="do not ask")
        if name == "approve":
            command.add_argument("--fingerprint", help="approve only this plan fingerprint")
        if name == "plan":
            command.add_argument(
                "--applied", action="store_true", help="the plan the last confirmed Apply ran"
            )
        if name in ("acknowledge", "settle"):
            command.add_argument("--operation-id", help="settle only this attempt")
        if name == "settle":
            command.add_argument("--reason", required=True, help="why no read can finish")
    completion = commands.add_parser("completion", help="print a shell completion script")
    completion.add_argument("shell", choices=SHELLS)
    return parser


def kubeconfig_of(args: argparse.Namespace) -> Kubeconfig:
    """The kubeconfig and context ``args`` name, read once (``kubectl_ptah.kubeconfig``)."""
    if args.config is None:
        args.config = load(args.kubeconfig, args.context, os.environ, Path.home())
    found: Kubeconfig = args.config
    return found


def connect(args: argparse.Namespace) -> ApiClient:
    """The client kubectl would use: the files and the context ``kubeconfig_of`` resolved."""
    config = kubeconfig_of(args)
    try:
        # The context by name: the client's loader would let the last file's
        # current-context win, kubectl lets the first.
        return KubeApi.from_kubeconfig(config.location, context=config.context)
    except KubeConfigError as error:
        why = str(error.__cause__ or error).strip().splitlines()[0].rstrip(".")
        raise KubeconfigError(
            f"the context {config.context!r} of the kubeconfig {config.location} "
            f"cannot be used: {why[:1].lower()}{why[1:]}"
        ) from None


# -- reading --------------------------------------------------------------------------


def _approvals(api: ApiClient, kind: str, namespace: str, plan_uid: str) -> list[dict[str, Any]]:
    """The approvals of one plan, with who admission says made them."""
    stamped = STAMPED[APPROVALS[kind].kind]
    out = []
    for obj in api.list(APPROVALS[kind], namespace):
        spec = obj.get("spec") or {}
        if (spec.get("planRef") or {}).get("uid") != plan_uid:
            continue
        stamp = written_stamp(stamped, spec)
        conditions = (obj.get("status") or {}).get("conditions") or []
        state = [c["type"] for c in conditions if c.get("status") == "True"]
        out.append(
            {
                "name": obj["metadata"]["name"],
                "by": stamp.username if stamp else None,
                "at": stamp.at if stamp else None,
                "state": ", ".join(state),
            }
        )
    return out


def _get(api: ApiClient, kind: str, namespace: str, name: str) -> Object:
    """The named resource; ``NotStored`` when there is none."""
    resource = KINDS[kind]
    try:
        return api.get(resource, namespace, name)
    except NotFound:
        raise NotStored(f"there is no {resource.kind} {name} in namespace {namespace}") from None


def _get_plan(
    api: ApiClient, plans: Resource, namespace: str, name: str, *, uid: str | None, named_by: str
) -> Object:
    """The plan ``named_by`` names; ``NotStored`` when it, with that UID, is gone."""
    try:
        found = api.get(plans, namespace, name)
    except NotFound:
        raise NotStored(f"the plan {name} that {named_by} names is not stored") from None
    if uid is not None and found.get("metadata", {}).get("uid") != uid:
        # The name was reused: the plan named is gone, whatever stands there now.
        raise NotStored(f"the plan {name} that {named_by} names is not stored (another UID)")
    return found


def read_plan(api: ApiClient, kind: str, namespace: str, name: str) -> PlanView:
    """The pending plan of ``kind`` ``name``, read now and verified."""
    raw = _get(api, kind, namespace, name)
    owner = f"{KINDS[kind].kind} {namespace}/{name}"
    try:
        if kind == "schema":
            schema = PtahSchema.model_validate(raw)
            current = schema.status.plan if schema.status else None
            if current is None:
                raise NotStored(f"{owner} has no pending plan")
            plan = PtahSchemaPlan.model_validate(
                _get_plan(api, PTAHSCHEMAPLANS, namespace, current.name, uid=None, named_by=owner)
            )
            chunks = _chunks(api, namespace, plan)
            approvals = _approvals(api, kind, namespace, current.uid)
            return schema_plan_view(schema, plan, chunks, approvals)
        migration = PtahMigration.model_validate(raw)
        ref = migration.status.plan if migration.status else None
        if ref is None:
            raise NotStored(f"{owner} has no pending plan")
        mplan = PtahMigrationPlan.model_validate(
            _get_plan(api, PTAHMIGRATIONPLANS, namespace, ref.name, uid=None, named_by=owner)
        )
        return migration_plan_view(migration, mplan, _approvals(api, kind, namespace, ref.uid))
    except ValidationError as error:
        raise Refused(f"a stored object does not decode: {_first_error(error)}") from None


def _chunks(api: ApiClient, namespace: str, plan: PtahSchemaPlan) -> dict[str, Object | None]:
    """The plan's stored chunks by name (None: not stored; the view refuses the plan)."""
    chunks: dict[str, Object | None] = {}
    for chunk in plan.spec.chunks:
        try:
            chunks[chunk.name] = api.get(PTAHSCHEMAPLANCHUNKS, namespace, chunk.name)
        except NotFound:
            chunks[chunk.name] = None
    return chunks


def read_applied(api: ApiClient, kind: str, namespace: str, name: str) -> PlanView:
    """The plan the last confirmed Apply of ``kind`` ``name`` ran, read now and verified.

    A schema records it whole (``status.applied``, set when the proof after an Apply
    that succeeded settles). A migration's ``lastRun`` names only its Job; the plan is
    the one the approval that Job spent names (``status.consumedJob``, the witness an
    approval keeps of the one run it authorized), so a run no approval authorized
    (``policy.apply: Always``) has no plan on record.
    """
    raw = _get(api, kind, namespace, name)
    owner = f"{KINDS[kind].kind} {namespace}/{name}"
    try:
        if kind == "schema":
            schema = PtahSchema.model_validate(raw)
            applied = schema.status.applied if schema.status else None
            if applied is None:
                raise NotStored(f"{owner} records no confirmed Apply")
            named_by = f"the last confirmed Apply of {owner}"
            plan = PtahSchemaPlan.model_validate(
                _get_plan(
                    api,
                    PTAHSCHEMAPLANS,
                    namespace,
                    applied.name,
                    uid=applied.uid,
                    named_by=named_by,
                )
            )
            approvals = _approvals(api, kind, namespace, applied.uid)
            return schema_plan_view(
                schema, plan, _chunks(api, namespace, plan), approvals, applied=applied
            )
        migration = PtahMigration.model_validate(raw)
        last = migration.status.last_run if migration.status else None
        if last is None or last.outcome != "Applied":
            ended = f"its last run ended {last.outcome}" if last else "it records no run"
            raise NotStored(f"{owner} records no confirmed Apply: {ended}")
        spent = _spent_by(api, namespace, migration, last.job_name, last.job_uid)
        if spent is None:
            raise NotStored(
                f"no approval names the Job {last.job_name} of the last run of {owner}, "
                "so the plan it ran is not on record"
            )
        ref, fingerprint = spent
        named_by = f"the approval of the last run of {owner}"
        mplan = PtahMigrationPlan.model_validate(
            _get_plan(api, PTAHMIGRATIONPLANS, namespace, ref.name, uid=ref.uid, named_by=named_by)
        )
        if mplan.spec.fingerprint != fingerprint:
            raise Refused(f"the plan {ref.name} is not the fingerprint its approval approved")
        approvals = _approvals(api, kind, namespace, ref.uid)
        return migration_plan_view(migration, mplan, approvals, applied=ref)
    except ValidationError as error:
        raise Refused(f"a stored object does not decode: {_first_error(error)}") from None


def _spent_by(
    api: ApiClient, namespace: str, migration: PtahMigration, job: str | None, job_uid: str | None
) -> tuple[ObjectReference, str] | None:
    """The plan (and fingerprint) of the approval of ``migration`` that ``job`` spent."""
    if not job:
        return None
    for raw in api.list(PTAHMIGRATIONAPPROVALS, namespace):
        approval = PtahMigrationApproval.model_validate(raw)
        witnessed = approval.status.consumed_job if approval.status else None
        if witnessed is None or witnessed.name != job:
            continue
        if job_uid is not None and witnessed.uid != job_uid:
            continue  # another Job of that name: not this run's
        if approval.spec.migration_ref.uid != migration.metadata.uid:
            continue
        return approval.spec.plan_ref, approval.spec.plan_fingerprint
    return None


def _first_error(error: ValidationError) -> str:
    first = error.errors()[0]
    where = ".".join(str(part) for part in first.get("loc", ()))
    return sentence(f"{where}: {first['msg']}" if where else first["msg"])


# -- deciding -------------------------------------------------------------------------


def _confirm(args: argparse.Namespace, question: str, stdin: TextIO, stdout: TextIO) -> None:
    if args.yes:
        return
    stdout.write(f"{question} [y/N] ")
    stdout.flush()
    if stdin.readline().strip().lower() not in ("y", "yes"):
        raise Refused("not confirmed; nothing was created")


Decision = (
    PtahSchemaApproval
    | PtahMigrationApproval
    | PtahMigrationRunAcknowledgment
    | PtahSchemaProofSettlement
)


def _create(
    api: ApiClient, namespace: str, generate_name: str, build: Callable[[ObjectMeta], Decision]
) -> Object:
    """Create one decision, built by its ``jobclaim.api`` model: the one wire shape.
    The API server names it after ``generate_name``, so two people deciding at once
    never collide.

    No stamp fields are set: admission writes the identity, the time and the request
    from the request itself, whatever a client sends.
    """
    try:
        decision = build(ObjectMeta(namespace=namespace, generate_name=generate_name))
    except ValidationError as error:
        raise Refused(f"the decision would not be valid: {_first_error(error)}") from None
    resource = DECISIONS[decision.kind]
    return api.create(resource, namespace, decision.to_wire())


def _ref(name: str, uid: str | None) -> ObjectReference:
    return ObjectReference(name=name, uid=uid or "")


def _stamped(created: Object) -> dict[str, Any]:
    kind = STAMPED[created["kind"]]
    stamp = written_stamp(kind, created.get("spec") or {})
    return {
        "kind": created["kind"],
        "namespace": created["metadata"].get("namespace"),
        "name": created["metadata"]["name"],
        "uid": created["metadata"].get("uid"),
        "stampedBy": stamp.username if stamp else None,
        "stampedGroups": list(stamp.groups) if stamp else [],
        "stampedAt": stamp.at if stamp else None,
        "mutationRequestUID": stamp.request_uid if stamp else None,
    }


def approve(
    api: ApiClient, args: argparse.Namespace, stdin: TextIO, stdout: TextIO
) -> dict[str, Any]:
    shown = read_plan(api, args.kind, args.namespace, args.name)
    if args.fingerprint and args.fingerprint != shown.fingerprint:
        raise Refused(
            f"the plan moved since it was shown: {args.fingerprint} is now {shown.fingerprint}"
        )
    if args.output == "text":
        stdout.write(plan_text(shown) + "\n\n")
    _confirm(args, f"approve plan {shown.plan_name} ({shown.fingerprint})?", stdin, stdout)
    # Read again: a plan replaced while the person read it is not the one they approve.
    problem = moved(shown, read_plan(api, args.kind, args.namespace, args.name))
    if problem is not None:
        raise Refused(f"{problem}; nothing was approved, review it again")
    plan_ref = _ref(shown.plan_name, shown.plan_uid)

    def build(meta: ObjectMeta) -> Decision:
        if args.kind == "schema":
            return PtahSchemaApproval(
                metadata=meta,
                spec=PtahSchemaApprovalSpec(
                    schema_ref=_ref(shown.name, shown.resource_uid),
                    plan_ref=plan_ref,
                    plan_fingerprint=shown.fingerprint,
                    execution_binding_id=shown.epoch,
                ),
            )
        return PtahMigrationApproval(
            metadata=meta,
            spec=PtahMigrationApprovalSpec(
                migration_ref=_ref(shown.name, shown.resource_uid),
                plan_ref=plan_ref,
                plan_fingerprint=shown.fingerprint,
                history_fingerprint=shown.history_fingerprint,
                execution_binding_id=shown.epoch,
            ),
        )

    created = _create(api, args.namespace, f"{args.name}-approval-", build)
    return _stamped(created)


def acknowledge(
    api: ApiClient, args: argparse.Namespace, stdin: TextIO, stdout: TextIO
) -> dict[str, Any]:
    migration = PtahMigration.model_validate(_get(api, "migration", args.namespace, args.name))
    run = migration.status.unresolved_run if migration.status else None
    if run is None:
        raise Refused(f"PtahMigration {args.namespace}/{args.name} has no unresolved run")
    if args.operation_id and args.operation_id != run.operation_id:
        raise Refused(f"the unresolved run is {run.operation_id}, not {args.operation_id}")
    if args.output == "text":
        stdout.write(record_text("unresolved run:", run.to_wire()) + "\n\n")
    _confirm(args, f"acknowledge run {run.operation_id} ({run.outcome})?", stdin, stdout)
    ref = _ref(args.name, migration.metadata.uid)
    return _stamped(
        _create(
            api,
            args.namespace,
            f"{args.name}-",
            lambda meta: PtahMigrationRunAcknowledgment(
                metadata=meta,
                spec=PtahMigrationRunAcknowledgmentSpec(
                    migration_ref=ref, operation_id=run.operation_id
                ),
            ),
        )
    )


def settle(
    api: ApiClient, args: argparse.Namespace, stdin: TextIO, stdout: TextIO
) -> dict[str, Any]:
    schema = PtahSchema.model_validate(_get(api, "schema", args.namespace, args.name))
    pending = schema.status.pending_observation if schema.status else None
    if pending is None:
        raise Refused(f"PtahSchema {args.namespace}/{args.name} owes no proof")
    if args.operation_id and args.operation_id != pending.apply_operation_id:
        raise Refused(
            f"the proof owed is for {pending.apply_operation_id}, not {args.operation_id}"
        )
    owed = {
        "applyOperationID": pending.apply_operation_id,
        "outcome": pending.outcome,
        "applyJob": pending.apply_job_name,
        "observeAfter": pending.observe_after,
        "why": "the Apply may have changed the database and no reading has proven what it "
        "holds; settling hands the database back with no Apply attributed",
    }
    if args.output == "text":
        stdout.write(record_text("proof owed:", owed) + "\n\n")
    _confirm(args, f"settle the proof of {pending.apply_operation_id}?", stdin, stdout)
    ref = _ref(args.name, schema.metadata.uid)
    return _stamped(
        _create(
            api,
            args.namespace,
            f"{args.name}-",
            lambda meta: PtahSchemaProofSettlement(
                metadata=meta,
                spec=PtahSchemaProofSettlementSpec(
                    schema_ref=ref,
                    apply_operation_id=pending.apply_operation_id,
                    reason=args.reason,
                ),
            ),
        )
    )


CLAIM_FIELDS: Final = (
    "type",
    "id",
    "attempt",
    "jobName",
    "dispatchStarted",
    "startedAt",
    "dispatchNotAfter",
    "executionNotAfter",
)
OWED_FIELDS: Final = (
    "pendingObservation",
    "unresolvedRun",
    "settledProof",
    "resolvedRun",
    "pendingLockRelease",
    "readingFailure",
    "nextReconciliationTime",
)


def status(api: ApiClient, args: argparse.Namespace) -> dict[str, Any]:
    raw = _get(api, args.kind, args.namespace, args.name)
    found = raw.get("status") or {}
    out: dict[str, Any] = {
        "kind": raw["kind"],
        "namespace": args.namespace,
        "name": args.name,
        "phase": found.get("phase"),
        "plan": (found.get("plan") or {}).get("name"),
    }
    claim = found.get("activeOperation")
    if claim:
        # With its deadlines: a claim past them is what PtahClaimStuck pages for.
        out["claim"] = {
            k: claim.get(k)
            for k in CLAIM_FIELDS
            if k in ("type", "id", "jobName", "dispatchStarted") or claim.get(k) is not None
        }
    # What is owed, and what stands in its way: each alert's runbook (docs/runbooks.md)
    # confirms its state here.
    for owed in OWED_FIELDS:
        if found.get(owed):
            out[owed] = found[owed]
    out["conditions"] = [
        f"{c.get('type')}={c.get('status')} {c.get('reason', '')}".strip()
        for c in found.get("conditions") or []
    ]
    plan_uid = (found.get("plan") or {}).get("uid")
    if plan_uid:
        out["approvals"] = _approvals(api, args.kind, args.namespace, plan_uid)
    return out


def _output_problem(args: argparse.Namespace) -> str | None:
    """Why ``-o`` cannot apply to this command, or None."""
    if args.output != "sql":
        return None
    if args.command != "plan":
        return f"-o sql prints a plan's statements; {args.command} has none to print"
    if args.kind == "migration":
        # A migration plan records versions and digests, never the SQL: SQL comments
        # naming them would be a script that runs nothing, and a pipe into psql
        # would report success.
        return (
            "-o sql prints a schema plan's statements; a PtahMigration's plan records "
            "migration versions and digests, not SQL (use -o text, json or yaml)"
        )
    return None


def _run(args: argparse.Namespace, connector: Connect, ins: TextIO, out: TextIO) -> str:
    """What the command prints, or a refusal."""
    if args.command == "completion":
        # Words only, from the parser: no kubeconfig is read, no server asked.
        return script(args.shell, words_of(_parser()))
    problem = _output_problem(args)
    if problem is not None:
        raise Usage(problem)
    if args.namespace is None:
        args.namespace = kubeconfig_of(args).namespace or DEFAULT_NAMESPACE
    api = connector(args)
    if args.command == "plan":
        read = read_applied if args.applied else read_plan
        view = read(api, args.kind, args.namespace, args.name)
        if args.output == "sql":
            return plan_sql(view)
        return _document(args, view.to_json()) or plan_text(view) + "\n"
    if args.command == "status":
        found = status(api, args)
        return _document(args, found) or record_text("status:", found) + "\n"
    act = {"approve": approve, "acknowledge": acknowledge, "settle": settle}
    made = act[args.command](api, args, ins, out)
    return _document(args, made) or record_text("created:", made) + "\n"


def _document(args: argparse.Namespace, document: Any) -> str | None:
    """The document for tools in the format asked (None: text for people)."""
    if args.output == "json":
        return json.dumps(document, indent=2) + "\n"
    if args.output == "yaml":
        return yaml_text(document)
    return None


def _server(args: argparse.Namespace) -> str:
    config: Kubeconfig | None = args.config
    return f"the API server {config.server}" if config is not None else "the API server"


def _no_answer(error: BaseException) -> str:
    """Why a request got no answer, in a few words: the first OS or TLS reason found."""
    seen: set[int] = set()
    stack: list[BaseException] = [error]
    while stack:
        found = stack.pop()
        if id(found) in seen:
            continue
        seen.add(id(found))
        if isinstance(found, ssl.SSLCertVerificationError):
            return f"its certificate is not trusted ({found.verify_message})"
        if isinstance(found, OSError) and found.strerror:
            return found.strerror.lower()
        # urllib3 keeps the cause in .reason as well as in the chain.
        for inner in (getattr(found, "reason", None), found.__cause__, found.__context__):
            if isinstance(inner, BaseException):
                stack.append(inner)
    return sentence(str(error))


def _api_error(args: argparse.Namespace, error: ApiError) -> tuple[str, int]:
    """One sentence and an exit code for an API error no command translated."""
    if isinstance(error, NotFound):
        return f"the API server has no such object: {sentence(str(error))}", NOTHING_STORED
    if isinstance(error, Unavailable) and error.status is None:
        return f"{_server(args)} did not answer: {_no_answer(error)}", FAILED
    if isinstance(error, Unavailable):
        return f"{_server(args)} failed ({error.status}): {sentence(str(error))}", FAILED
    return f"the API server refused: {sentence(str(error))}", FAILED


def main(
    argv: Sequence[str] | None = None,
    *,
    connector: Connect = connect,
    stdin: TextIO | None = None,
    stdout: TextIO | None = None,
) -> int:
    """Run one command; every failure is one sentence on stderr and an exit code."""
    args = _parser().parse_args(argv)
    for key, value in _DEFAULTS.items():
        if not hasattr(args, key):
            setattr(args, key, value)
    ins, out = stdin or sys.stdin, stdout or sys.stdout
    try:
        out.write(_run(args, connector, ins, out))
        out.flush()
    except BrokenPipeError:
        # The reader went away (``| head``): nothing is left to say to it, and Python
        # must not complain about the unflushed rest when it exits.
        if out is sys.stdout:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return FAILED
    except Refused as refused:
        return _fail(str(refused), exit_code(refused))
    except PlanUnreadable as unreadable:
        return _fail(sentence(str(unreadable)), FAILED)
    except ApiError as error:
        return _fail(*_api_error(args, error))
    except ValidationError as error:
        return _fail(f"a stored object does not decode: {_first_error(error)}", FAILED)
    except KeyboardInterrupt:
        return _fail("interrupted", FAILED)
    except Exception as error:
        # The last net: whatever went wrong, one sentence naming it, never a traceback.
        return _fail(f"unexpected {type(error).__name__}: {sentence(str(error))}", FAILED)
    return OK


def _fail(message: str, code: int) -> int:
    sys.stderr.write(f"kubectl ptah: {message}\n")
    return code


if __name__ == "__main__":
    sys.exit(main())
