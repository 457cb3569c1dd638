"""PostgreSQL statements read by PostgreSQL's own parser (pglast, libpg_query).

The tree is walked as the JSON libpg_query emits, every node of it: a ``DELETE``
inside a CTE, the query under ``EXPLAIN ANALYZE`` or the elements of a ``CREATE
SCHEMA`` are found wherever they sit. Two tables decide:

- ``_ADDITIVE``: the statement kinds that can be additive at all, each with the
  check its own fields need (``OR REPLACE``, ``SECURITY DEFINER``, ``ON CONFLICT DO
  UPDATE``). A kind not listed is not known to be additive, which is a finding of
  its own (destructive and privileged): the parser knows far more statements than
  this module, and a new one must be read before it may run unapproved.
- ``_NODES``: what any node anywhere in the tree shows (drops, deletes, updates,
  renames, grants, owner changes, code run), so nesting hides nothing.

A function call runs code, so only a short list of built-in functions (unqualified
or ``pg_catalog.``) may appear in an additive statement: defaults such as ``now()``
and ``nextval()``, and plain text and time helpers. Operators are not judged: an
operator on a user's own type runs that type's function, which a person approved
when it was created.

Imported lazily by ``jobclaim.statements``: the runner ships ``jobclaim`` into the
executor's container without the parser, and never classifies.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any, Final

from pglast.parser import ParseError, parse_sql_json

from jobclaim._sqlverdict import Finding, Verdict, destroys, grants, unknown, unreadable

__all__ = ["ENGINE", "SqlUnreadable", "classify_statement", "read"]

ENGINE: Final = "PostgreSQL"
Node = dict[str, Any]


class SqlUnreadable(Exception):
    """The text as a whole is not valid PostgreSQL."""


# Built-in functions an additive statement may call (defaults, checks, index
# expressions, inserted values): none writes, none reaches outside the statement.
SAFE_FUNCTIONS: Final = frozenset(
    {
        "now",
        "statement_timestamp",
        "transaction_timestamp",
        "clock_timestamp",
        "timezone",
        "date_trunc",
        "date_part",
        "extract",
        "make_interval",
        "to_char",
        "nextval",
        "gen_random_uuid",
        "lower",
        "upper",
        "length",
        "char_length",
        "btrim",
        "ltrim",
        "rtrim",
        "substring",
        "substr",
        "left",
        "right",
        "replace",
        "concat",
        "concat_ws",
        "split_part",
        "md5",
        "abs",
        "round",
        "array_length",
        "cardinality",
        "jsonb_build_object",
        "json_build_object",
        "jsonb_build_array",
        "to_jsonb",
        "int4range",
        "int8range",
        "numrange",
        "tsrange",
        "tstzrange",
        "daterange",
    }
)
# Settings a plan may change without changing what its other statements mean or
# whose rights they run with (search_path is not one: it redirects every name).
SAFE_SETTINGS: Final = frozenset(
    {
        "lock_timeout",
        "statement_timeout",
        "idle_in_transaction_session_timeout",
        "client_min_messages",
        "client_encoding",
        "check_function_bodies",
        "standard_conforming_strings",
        "xmloption",
    }
)
ADDITIVE_SUBTYPES: Final = frozenset(
    {
        "AT_AddColumn",
        "AT_AddConstraint",
        "AT_AddIndex",
        "AT_AddIndexConstraint",
        "AT_SetNotNull",
        "AT_ValidateConstraint",
        "AT_AddIdentity",
        "AT_SetStatistics",
        "AT_CookedColumnDefault",
    }
)
_SUBTYPE_FINDINGS: Final = {
    "AT_DropColumn": destroys("drops a column"),
    "AT_AlterColumnType": destroys("changes a column's type"),
    "AT_DropConstraint": destroys("drops a constraint"),
    "AT_DropNotNull": destroys("drops a NOT NULL constraint"),
    "AT_DropIdentity": destroys("drops an identity"),
    "AT_DropExpression": destroys("drops a generated column's expression"),
    "AT_DetachPartition": destroys("detaches a partition"),
    "AT_DropInherit": destroys("drops an inheritance"),
    "AT_ChangeOwner": grants("changes a table's owner"),
    "AT_EnableRowSecurity": grants("changes row security"),
    "AT_DisableRowSecurity": grants("changes row security"),
    "AT_ForceRowSecurity": grants("changes row security"),
    "AT_NoForceRowSecurity": grants("changes row security"),
}
_TRANSACTION_UNSAFE: Final = frozenset(
    {"TRANS_STMT_PREPARE", "TRANS_STMT_COMMIT_PREPARED", "TRANS_STMT_ROLLBACK_PREPARED"}
)


def read(text: str) -> list[tuple[str, Verdict]]:
    """Each statement of ``text`` (its own words, ``;`` kept) with its verdict.

    Raises ``SqlUnreadable`` when the text as a whole is not valid PostgreSQL: then
    not even where one statement ends is known for sure.
    """
    try:
        tree = json.loads(parse_sql_json(text))
    except ParseError as error:
        raise SqlUnreadable(str(error)) from error
    data = text.encode("utf-8")
    out: list[tuple[str, Verdict]] = []
    cursor = 0
    for raw in tree.get("stmts", []):
        # libpg_query's locations are byte offsets into the UTF-8 text; a length of
        # 0 means "to the end". Each statement's text runs from the end of the one
        # before, so a reviewer is shown every byte, comments included.
        start = int(raw.get("stmt_location", 0))
        length = int(raw.get("stmt_len", 0))
        end = start + length if length else len(data)
        if data[end : end + 1] == b";":
            end += 1
        sql = data[cursor:end].decode("utf-8").strip()
        cursor = end
        out.append((sql, classify_statement(raw["stmt"])))
    return out


def classify_one(sql: str) -> Verdict:
    """One statement's verdict, read on its own (unreadable: destructive and privileged)."""
    try:
        statements = read(sql)
    except SqlUnreadable as error:
        return unreadable(ENGINE, str(error))
    return Verdict(tuple(f for _, v in statements for f in v.findings))


def classify_statement(stmt: Node) -> Verdict:
    """The verdict on one statement node (``{"CreateStmt": {...}}``)."""
    return Verdict(tuple(_findings(stmt)))


def _findings(stmt: Node) -> Iterator[Finding]:
    nested = list(_walk_findings(stmt))
    yield from nested
    yield from _own_findings(stmt, found_nested=bool(nested))


def _own_findings(stmt: Node, *, found_nested: bool) -> Iterator[Finding]:
    """What a statement's own kind needs checked; a kind that cannot be additive is a
    finding of its own unless the walk already said what it does."""
    (kind, body), *_ = stmt.items()
    check = _ADDITIVE.get(kind)
    if check is not None:
        yield from check(body)
    elif not found_nested:
        yield unknown(f"{_words(kind)} is not known to be additive")


def _walk_findings(value: Any) -> Iterator[Finding]:
    for kind, body in _nodes(value):
        rule = _NODES.get(kind)
        if rule is not None:
            yield from rule(body)


def _nodes(value: Any) -> Iterator[tuple[str, Node]]:
    """Every node of the tree, depth first: a dict of one key naming its type."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if len(item) == 1:
                ((key, body),) = item.items()
                if key[:1].isupper() and isinstance(body, dict):
                    yield key, body
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def _words(kind: str) -> str:
    """``AlterSeqStmt`` -> ``an AlterSeq statement``: the parser's own name for it."""
    name = kind.removesuffix("Stmt")
    return f"{'an' if name[:1] in 'AEIOU' else 'a'} {name} statement"


def _object(objtype: Any) -> str:
    """``OBJECT_TABLE`` -> ``a table``."""
    name = str(objtype or "OBJECT_UNKNOWN").removeprefix("OBJECT_").lower().replace("_", " ")
    return f"{'an' if name[:1] in 'aeiou' else 'a'} {name}"


def _function_name(body: Node) -> str:
    return ".".join(str(p.get("String", {}).get("sval", "?")) for p in body.get("funcname", []))


def _function_call(body: Node) -> Iterator[Finding]:
    parts = [str(p.get("String", {}).get("sval", "")) for p in body.get("funcname", [])]
    bare = parts[-1] if parts else ""
    if parts[:-1] in ([], ["pg_catalog"]) and bare in SAFE_FUNCTIONS:
        return
    yield unknown(f"calls {_function_name(body)}(), which may run any code")


def _copy(body: Node) -> Iterator[Finding]:
    if body.get("is_program"):
        yield unknown("runs a program on the database server (COPY ... PROGRAM)")
    elif body.get("filename"):
        yield unknown("reads or writes a file on the database server (COPY with a file)")
    else:
        yield destroys("copies rows (COPY)")


def _alter_table_cmd(body: Node) -> Iterator[Finding]:
    subtype = str(body.get("subtype", ""))
    if subtype in ADDITIVE_SUBTYPES:
        return
    if subtype == "AT_ColumnDefault":
        if "def" not in body:
            yield destroys("drops a column default")
        return
    found = _SUBTYPE_FINDINGS.get(subtype)
    if found is not None:
        yield found
    elif subtype.startswith(("AT_EnableTrig", "AT_DisableTrig", "AT_EnableAlwaysTrig")):
        yield unknown("changes which triggers run")
    else:
        yield destroys(f"alters a table in a way not known to be additive ({subtype})")


def _grant(body: Node) -> Iterator[Finding]:
    yield grants("grants privileges" if body.get("is_grant") else "revokes privileges")


def _grant_role(body: Node) -> Iterator[Finding]:
    yield grants("grants a role" if body.get("is_grant") else "revokes a role")


def _transaction(body: Node) -> Iterator[Finding]:
    if body.get("kind") in _TRANSACTION_UNSAFE:
        yield unknown("prepares or ends a two-phase transaction")


def _setting(body: Node) -> Iterator[Finding]:
    name = body.get("name")
    if name in ("role", "session_authorization"):
        yield grants("switches the role the statements run as")


def _const(finding: Finding) -> Callable[[Node], Iterator[Finding]]:
    def rule(_: Node) -> Iterator[Finding]:
        yield finding

    return rule


# What a node shows wherever it stands in the tree.
_NODES: Final[dict[str, Callable[[Node], Iterator[Finding]]]] = {
    "DropStmt": lambda b: iter([destroys(f"drops {_object(b.get('removeType'))}")]),
    "DeleteStmt": _const(destroys("deletes rows")),
    "UpdateStmt": _const(destroys("updates rows")),
    "MergeStmt": _const(destroys("merges rows (may update or delete)")),
    "TruncateStmt": _const(destroys("truncates a table")),
    "RenameStmt": lambda b: iter([destroys(f"renames {_object(b.get('renameType'))}")]),
    "AlterObjectSchemaStmt": _const(destroys("moves an object to another schema")),
    "DropdbStmt": _const(destroys("drops a database")),
    "DropTableSpaceStmt": _const(destroys("drops a tablespace")),
    "DoStmt": _const(unknown("runs code (a DO block)")),
    "CallStmt": _const(unknown("runs code (CALL of a procedure)")),
    "CreateTrigStmt": _const(unknown("attaches code to a table's writes (a trigger)")),
    "CreateEventTrigStmt": _const(unknown("attaches code to DDL (an event trigger)")),
    "CreateExtensionStmt": _const(unknown("runs an extension's install script")),
    "AlterExtensionStmt": _const(unknown("runs an extension's update script")),
    "LoadStmt": _const(unknown("loads a shared library")),
    "AlterSystemStmt": _const(unknown("changes the server's configuration")),
    "CopyStmt": _copy,
    "FuncCall": _function_call,
    "AlterTableCmd": _alter_table_cmd,
    "GrantStmt": _grant,
    "GrantRoleStmt": _grant_role,
    "AlterDefaultPrivilegesStmt": _const(grants("changes default privileges")),
    "AlterOwnerStmt": _const(grants("changes an owner")),
    "CreateRoleStmt": _const(grants("creates a role")),
    "AlterRoleStmt": _const(grants("changes a role or its members")),
    "AlterRoleSetStmt": _const(grants("changes a role's settings")),
    "DropRoleStmt": _const(unknown("drops a role")),
    "ReassignOwnedStmt": _const(grants("reassigns ownership")),
    "DropOwnedStmt": _const(unknown("drops what a role owns")),
    "CreatePolicyStmt": _const(grants("changes row security (a policy)")),
    "AlterPolicyStmt": _const(grants("changes row security (a policy)")),
    "SecLabelStmt": _const(grants("changes a security label")),
    "CreateUserMappingStmt": _const(grants("creates a user mapping")),
    "AlterUserMappingStmt": _const(grants("changes a user mapping")),
    "TransactionStmt": _transaction,
    "VariableSetStmt": _setting,
}


def _nothing(_: Node) -> Iterator[Finding]:
    return iter(())


def _view(body: Node) -> Iterator[Finding]:
    if body.get("replace"):
        yield destroys("replaces a view")


def _schema(body: Node) -> Iterator[Finding]:
    if body.get("authrole"):
        yield grants("creates a schema owned by another role")
    for element in body.get("schemaElts", []):
        # The walk of the whole statement already reported the elements' nodes.
        found_nested = any(True for _ in _walk_findings(element))
        yield from _own_findings(element, found_nested=found_nested)


def _insert(body: Node) -> Iterator[Finding]:
    if (body.get("onConflictClause") or {}).get("action") == "ONCONFLICT_UPDATE":
        yield destroys("updates rows on conflict")


def _function(body: Node) -> Iterator[Finding]:
    if body.get("replace"):
        yield destroys("replaces a function")
    for option in body.get("options", []):
        element = option.get("DefElem", {})
        arg = element.get("arg", {})
        if element.get("defname") == "security" and arg.get("Boolean", {}).get("boolval"):
            yield grants("a SECURITY DEFINER function runs with its owner's rights")
        if element.get("defname") == "language":
            language = str(arg.get("String", {}).get("sval", "")).lower()
            if language not in ("sql", "plpgsql"):
                yield grants(f"a function in language {language} may reach outside SQL")


def _enum(body: Node) -> Iterator[Finding]:
    if body.get("oldVal"):
        yield destroys("renames an enum value")


def _set(body: Node) -> Iterator[Finding]:
    name = body.get("name")
    if name is None:
        yield grants("resets every setting, the role included")
    elif name not in SAFE_SETTINGS and name not in ("role", "session_authorization"):
        yield destroys(f"changes the setting {name}, which can change what later statements mean")


# The statement kinds that can be additive, each with the check its fields need.
_ADDITIVE: Final[dict[str, Callable[[Node], Iterator[Finding]]]] = {
    "CreateStmt": _nothing,
    "IndexStmt": _nothing,
    "CreateSeqStmt": _nothing,
    "CreateEnumStmt": _nothing,
    "CompositeTypeStmt": _nothing,
    "CreateDomainStmt": _nothing,
    "CreateRangeStmt": _nothing,
    "CreateStatsStmt": _nothing,
    "CommentStmt": _nothing,
    "CreateTableAsStmt": _nothing,
    "AlterTableStmt": _nothing,
    "TransactionStmt": _nothing,
    "ViewStmt": _view,
    "CreateSchemaStmt": _schema,
    "InsertStmt": _insert,
    "CreateFunctionStmt": _function,
    "AlterEnumStmt": _enum,
    "VariableSetStmt": _set,
}
