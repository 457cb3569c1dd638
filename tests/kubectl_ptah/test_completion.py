"""``kubectl ptah completion``: the bash script, run by bash, offers what the parser takes.

zsh and fish are not installed here: their scripts are checked for what they are
made of (zsh runs the bash function; fish lists each command's kinds and flags).
"""

from __future__ import annotations

import io
import shutil
import subprocess

import pytest

from kubectl_ptah import main
from kubectl_ptah.cli import _parser
from kubectl_ptah.completion import script, words_of


def completion(shell: str) -> str:
    out = io.StringIO()

    def no_server(_args: object) -> object:
        raise AssertionError("completion must not connect")

    assert main(["completion", shell], connector=no_server, stdout=out) == 0
    return out.getvalue()


BASH = shutil.which("bash")


def offered(words: list[str]) -> list[str]:
    """What the bash script offers for ``words`` (the last one being completed)."""
    assert BASH is not None
    line = " ".join(f"'{w}'" for w in words)
    program = (
        f"{completion('bash')}\n"
        f"COMP_WORDS=({line}); COMP_CWORD={len(words) - 1}; _kubectl_ptah\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    done = subprocess.run(
        [BASH, "--norc", "-c", program], capture_output=True, text=True, timeout=30, check=True
    )
    return done.stdout.split()


ROWS = [
    (["kubectl-ptah", "pl"], ["plan"]),
    (["kubectl-ptah", "a"], ["approve", "acknowledge"]),
    (["kubectl-ptah", "--v"], ["--version"]),
    (["kubectl-ptah", "plan", ""], ["schema", "migration"]),
    (["kubectl-ptah", "-n", "shop", "acknowledge", ""], ["migration"]),
    (["kubectl-ptah", "plan", "schema", "orders", "--ap"], ["--applied"]),
    (["kubectl-ptah", "settle", "schema", "orders", "--r"], ["--reason"]),
    (["kubectl-ptah", "status", "schema", "orders", "-o", ""], ["text", "json", "yaml", "sql"]),
    (["kubectl-ptah", "completion", ""], ["bash", "zsh", "fish"]),
    (["kubectl-ptah", "status", "schema", "orders", "--ap"], []),
]


@pytest.mark.parametrize(("words", "expected"), ROWS)
def test_bash_offers_what_the_parser_takes(words: list[str], expected: list[str]) -> None:
    assert offered(words) == expected


def test_zsh_runs_the_bash_function() -> None:
    zsh = completion("zsh")
    assert zsh.startswith("autoload -U +X bashcompinit && bashcompinit\n")
    assert zsh.endswith(completion("bash"))


def test_fish_names_every_command_kind_and_flag() -> None:
    fish = completion("fish")
    words = words_of(_parser())
    assert fish == script("fish", words)
    for command in words.commands:
        seen = f"-n '__fish_seen_subcommand_from {command.name}'"
        if command.kinds:
            assert f"{seen} -a '{' '.join(command.kinds)}'" in fish
        for flag in set(command.flags) - set(words.flags) - {"--output", "--namespace"}:
            assert f"{seen} -l {flag[2:]}" in fish
    assert "complete -c kubectl-ptah -s o -l output -x -a 'text json yaml sql'" in fish
