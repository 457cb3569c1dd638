"""``kubectl ptah completion bash|zsh|fish``: static completion scripts for the plugin.

Each script is written from the parser itself (its commands, their kinds and flags,
and the ``-o`` formats), so a flag added to the parser is completed without a second
list to keep in step. The scripts complete words only: no script calls the plugin
or the API server while the user types, so completing a name never costs a request.

They complete the executable ``kubectl-ptah``. ``kubectl ptah <TAB>`` runs inside
kubectl's own completion, which (from kubectl 1.26) asks an executable named
``kubectl_complete-ptah``; this module does not provide one.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

SHELLS = ("bash", "zsh", "fish")
PROGRAM = "kubectl-ptah"


@dataclass(frozen=True, slots=True)
class Command:
    name: str
    kinds: tuple[str, ...]  # the first positional's choices, if it has any
    flags: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Words:
    """What a completion script offers, read from the parser."""

    flags: tuple[str, ...]  # accepted before the command
    commands: tuple[Command, ...]
    outputs: tuple[str, ...]


def _flags(parser: argparse.ArgumentParser) -> tuple[str, ...]:
    return tuple(o for a in parser._actions for o in a.option_strings if o.startswith("--"))


def words_of(parser: argparse.ArgumentParser) -> Words:
    commands: list[Command] = []
    outputs: tuple[str, ...] = ()
    for action in parser._actions:
        if "--output" in action.option_strings and action.choices is not None:
            outputs = tuple(str(c) for c in action.choices)
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                positional = [a for a in sub._actions if not a.option_strings]
                choices = positional[0].choices if positional else None
                kinds = tuple(str(c) for c in choices) if choices is not None else ()
                commands.append(Command(name, kinds, _flags(sub)))
    return Words(_flags(parser), tuple(commands), outputs)


def script(shell: str, words: Words) -> str:
    """The completion script for ``shell`` (one of ``SHELLS``)."""
    if shell == "fish":
        return _fish(words)
    bash = _bash(words)
    if shell == "zsh":
        # zsh runs the bash function through its own bash-completion layer.
        return "autoload -U +X bashcompinit && bashcompinit\n" + bash
    return bash


def _bash(words: Words) -> str:
    names = " ".join(c.name for c in words.commands)
    cases = "".join(
        f"        {c.name}) kinds='{' '.join(c.kinds)}'; flags='{' '.join(c.flags)}' ;;\n"
        for c in words.commands
    )
    return f"""# {PROGRAM} completion for bash: source <({PROGRAM} completion bash)
_kubectl_ptah() {{
    local cur prev command word kinds flags i
    cur="${{COMP_WORDS[COMP_CWORD]}}"
    prev="${{COMP_WORDS[COMP_CWORD-1]}}"
    case "$prev" in
        -o|--output) COMPREPLY=($(compgen -W '{" ".join(words.outputs)}' -- "$cur")); return ;;
        --kubeconfig) COMPREPLY=($(compgen -f -- "$cur")); return ;;
        -n|--namespace|--context|--fingerprint|--operation-id|--reason) return ;;
    esac
    command=''
    for ((i = 1; i < COMP_CWORD; i++)); do
        word="${{COMP_WORDS[i]}}"
        case " {names} " in *" $word "*) command="$word"; break ;; esac
    done
    if [[ -z "$command" ]]; then
        COMPREPLY=($(compgen -W '{names} {" ".join(words.flags)}' -- "$cur"))
        return
    fi
    case "$command" in
{cases}    esac
    if [[ "$cur" != -* && $((COMP_CWORD - i)) -eq 1 && -n "$kinds" ]]; then
        COMPREPLY=($(compgen -W "$kinds" -- "$cur"))
    else
        COMPREPLY=($(compgen -W "$flags" -- "$cur"))
    fi
}}
complete -F _kubectl_ptah {PROGRAM}
"""


def _fish(words: Words) -> str:
    names = " ".join(c.name for c in words.commands)
    lines = [
        f"# {PROGRAM} completion for fish: {PROGRAM} completion fish | source",
        f"complete -c {PROGRAM} -f",
        f"complete -c {PROGRAM} -n '__fish_use_subcommand' -a '{names}'",
        f"complete -c {PROGRAM} -s o -l output -x -a '{' '.join(words.outputs)}'",
        f"complete -c {PROGRAM} -s n -l namespace -x",
        f"complete -c {PROGRAM} -l kubeconfig -r -F",
    ]
    taken = {"--output", "--namespace", "--kubeconfig"}
    lines.extend(f"complete -c {PROGRAM} -l {f[2:]}" for f in words.flags if f not in taken)
    for c in words.commands:
        seen = f"__fish_seen_subcommand_from {c.name}"
        if c.kinds:
            lines.append(f"complete -c {PROGRAM} -n '{seen}' -a '{' '.join(c.kinds)}'")
        lines.extend(
            f"complete -c {PROGRAM} -n '{seen}' -l {f[2:]}"
            for f in c.flags
            if f not in taken and f not in words.flags
        )
    return "\n".join(lines) + "\n"
