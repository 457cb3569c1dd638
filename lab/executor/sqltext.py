"""Splitting SQL text into statements and naming what each one is.

The executor never parses SQL beyond this: it needs statement boundaries (to run a
migration file statement by statement, to say which statement of a desired schema failed)
and each statement's leading keywords (to refuse a construct outside the lab's scope before
the dev database sees it). Quotes, dollar quotes and comments are skipped so a semicolon or
a keyword inside them is never mistaken for structure.
"""

from __future__ import annotations

import re

_DOLLAR_TAG = re.compile(r"\$([A-Za-z_][A-Za-z_0-9]*)?\$")
_WORD = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")


class SqlTextError(ValueError):
    """SQL text whose quoting or comments never close."""


def _skip_quoted(text: str, start: int, quote: str, backslashes: bool) -> int:
    index = start + 1
    while index < len(text):
        char = text[index]
        if backslashes and char == "\\":
            index += 2
            continue
        if char == quote:
            if index + 1 < len(text) and text[index + 1] == quote:
                index += 2
                continue
            return index + 1
        index += 1
    raise SqlTextError(f"a {quote} quote opened at offset {start} never closes")


def _skip_block_comment(text: str, start: int) -> int:
    depth = 0
    index = start
    while index < len(text):
        if text.startswith("/*", index):
            depth += 1
            index += 2
        elif text.startswith("*/", index):
            depth -= 1
            index += 2
            if depth == 0:
                return index
        else:
            index += 1
    raise SqlTextError(f"a comment opened at offset {start} never closes")


def _skip_line_comment(text: str, start: int) -> int:
    end = text.find("\n", start)
    return len(text) if end < 0 else end + 1


def _scan(text: str) -> tuple[list[str], list[list[str]]]:
    """Statements (trimmed, without their semicolon) and the bare words of each."""
    statements: list[str] = []
    words: list[list[str]] = []
    current_words: list[str] = []
    begin = 0
    index = 0
    while index < len(text):
        char = text[index]
        if char == "'":
            escaped = index > 0 and text[index - 1] in "eE" and not _word_before(text, index - 1)
            index = _skip_quoted(text, index, "'", escaped)
        elif char == '"':
            index = _skip_quoted(text, index, '"', False)
        elif text.startswith("--", index):
            index = _skip_line_comment(text, index)
        elif text.startswith("/*", index):
            index = _skip_block_comment(text, index)
        elif (
            char == "$"
            and (match := _DOLLAR_TAG.match(text, index))
            and not _word_before(text, index)
        ):
            tag = match.group(0)
            end = text.find(tag, match.end())
            if end < 0:
                raise SqlTextError(f"a {tag} quote opened at offset {index} never closes")
            index = end + len(tag)
        elif char == ";":
            _close(text[begin:index], current_words, statements, words)
            current_words = []
            begin = index + 1
            index += 1
        elif (match := _WORD.match(text, index)) and not _word_before(text, index):
            current_words.append(match.group(0).upper())
            index = match.end()
        else:
            index += 1
    _close(text[begin:], current_words, statements, words)
    return statements, words


def _word_before(text: str, index: int) -> bool:
    return index > 0 and (text[index - 1].isalnum() or text[index - 1] in "_$")


def _close(
    chunk: str, chunk_words: list[str], statements: list[str], words: list[list[str]]
) -> None:
    if chunk_words:
        statements.append(chunk.strip())
        words.append(chunk_words)


def split_statements(text: str) -> list[str]:
    """The statements of ``text`` in order; comments-only chunks are dropped."""
    return _scan(text)[0]


def leading_words(text: str) -> list[list[str]]:
    """The upper-cased bare words of each statement, in order (quoted text excluded)."""
    return _scan(text)[1]


# What a desired-schema file may say: tables, their indexes, and ALTER TABLE (for the
# foreign keys two tables point at each other with). Everything else is refused before the
# dev database runs it, because a scratch transaction that met COMMIT, SET or CREATE SCHEMA
# would no longer be scratch.
_DESIRED_FORMS: tuple[tuple[str, ...], ...] = (
    ("CREATE", "TABLE"),
    ("CREATE", "INDEX"),
    ("CREATE", "UNIQUE", "INDEX"),
    ("ALTER", "TABLE"),
)


def desired_schema_problem(text: str) -> str | None:
    """Why ``text`` is not a desired schema inside the lab's scope, or None."""
    try:
        statements, words = _scan(text)
    except SqlTextError as error:
        return f"the desired schema is not well-formed sql: {error}"
    if not statements:
        return "the desired schema file holds no statements"
    for number, statement_words in enumerate(words, start=1):
        if not any(tuple(statement_words[: len(form)]) == form for form in _DESIRED_FORMS):
            head = " ".join(statement_words[:3])
            return (
                f"the desired schema's statement {number} ({head} ...) is outside the lab "
                "executor's scope, which covers create table, create [unique] index and "
                "alter table only"
            )
        if "CONCURRENTLY" in statement_words[:4]:
            return (
                f"the desired schema's statement {number} creates an index concurrently, "
                "which the lab executor does not cover"
            )
    return None
