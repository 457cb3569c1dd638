"""``kubectl ptah``: the kubectl plugin people review plans and make decisions with.

Installed as the executable ``kubectl-ptah`` (kubectl finds it on PATH). It imports
only the shared contract (``jobclaim``) and the API adapter, never the controller's
or the webhook's internals.
"""

from kubectl_ptah.cli import main

__all__ = ["main"]
