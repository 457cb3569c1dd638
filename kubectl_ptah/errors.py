"""What ``kubectl ptah`` refuses, and the exit code each refusal ends with: 0 done,
1 refused or failed, 2 usage, 3 nothing stored.

Every refusal carries one lower-case sentence, printed after ``kubectl ptah:`` on
stderr; the class says which exit code a script sees.
"""

from __future__ import annotations


class Refused(Exception):
    """A decision this command will not make, or a read that failed; exit 1."""


class KubeconfigError(Refused):
    """The kubeconfig cannot be read or names no usable context: no request was made."""


class NotStored(Refused):
    """The named resource, or the plan it names, does not exist; exit 3."""


class Usage(Refused):
    """The arguments ask for something no command does (argparse's own: exit 2)."""


OK = 0
FAILED = 1
USAGE = 2
NOTHING_STORED = 3


def exit_code(error: Refused) -> int:
    """The exit code a refusal ends the command with."""
    if isinstance(error, NotStored):
        return NOTHING_STORED
    if isinstance(error, Usage):
        return USAGE
    return FAILED


def sentence(text: str) -> str:
    """Someone else's message as one line of ours: no line breaks, no closing period."""
    flat = " ".join(text.split()).rstrip(".")
    if flat[:1].isupper() and not flat[1:2].isupper():
        # "Invalid kube-config" reads as the middle of our sentence; "API ..." stays.
        flat = flat[:1].lower() + flat[1:]
    return flat or "no reason given"
