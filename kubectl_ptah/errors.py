"""What ``kubectl ptah`` refuses, and the exit code each refusal ends with.

Every refusal carries one lower-case sentence, printed after ``kubectl ptah:`` on
stderr; the class says which exit code a script sees.
"""

from __future__ import annotations


class Refused(Exception):
    """A decision this command will not make, or a read that failed; exit 1."""


class KubeconfigError(Refused):
    """The kubeconfig cannot be read or names no usable context: no request was made."""
