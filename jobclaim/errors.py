"""The operator's error hierarchy, rooted here because every package imports jobclaim.

The whole tree, by the package that raises each branch (this docstring is its one
drawing; a new exception class belongs in it):

    PtahError                      jobclaim.errors: an error the operator raises on purpose
     ├── InvalidInput              an input a name, digest, snapshot or Job cannot be formed from
     │    └── BuildRefused         the builder will not build a Job from this claim
     │         └── PlanGone        controller.families.migration.dispatch: an Apply's plan is gone
     ├── CRDError                  jobclaim.crds: a model with no structural schema
     ├── ApiError                  jobclaim.apiserver: a failed API call
     │    ├── NotFound
     │    ├── Conflict             a compare-and-swap lost its race (compare_and_swap retries)
     │    ├── AlreadyExists
     │    ├── Refused              the server (or a webhook) said no
     │    │    └── Invalid
     │    └── Unavailable          no answer, or one that does not say whether it wrote
     ├── KubeConfigError           kube.client: no usable kubeconfig
     ├── controller: one meaning each, raised by the pass and caught by the reconciler
     │    ├── MayHaveDispatched    a claim that may have a Job handed to dispatch or discard
     │    ├── UnknownOperation     a claim of an operation the family does not define
     │    ├── RegistryCAUnreadable  the registry CA bundle a new claim would pin cannot be read
     │    ├── NoClaim              a step that needs the claim found none
     │    ├── NotThisFamily        a family's step handed the other family's resource
     │    ├── ApprovalGone         the approval no longer authorizes anything
     │    ├── PlanUnverified       a plan whose chunks are not its own
     │    ├── ProjectionConflict   a ConfigMap under a projection's name that is not it
     │    ├── AdmissionUnresolvable  the admission snapshot cannot be resolved
     │    ├── MalformedLease       a foreign Lease whose expiry cannot be read
     │    ├── UnreadableCopy       a migration's unresolved-run copy that cannot be read
     │    ├── PublishRefused       a reading that cannot become a plan
     │    └── ReadingUnrecordable  a reading's account the claim cannot record
     └── RunnerError               runner.errors: the Job's program and its result protocol
          ├── RecordError          no result record bound to the attempt could be read
          │    ├── RecordNotFound
          │    ├── ResultTooLarge
          │    └── MalformedRecord
          │         └── ForeignRecord  the record is another operation's or attempt's
          ├── RecordUnwritten      the runner could not create its result record
          ├── SummaryRefused       a termination summary that cannot stand in for a record
          └── ConfigurationError   the Job's environment cannot be run from

Outside the tree on purpose: the webhook's control flow (``webhook.rules``: ``Denied``
carries a verdict, ``Malformed`` is an HTTP 400 and ``ReadFailed`` an HTTP 500, none of
them an operator failure), ``certs`` (``CertificateError`` and its four kinds: file,
key and rotation failures its CLI reports on their own, most with no API involved) and
the lab (``lab.localplane.ControlPlaneError``).

Messages are lower-case sentences saying what is wrong; callers prefix context.
"""

from __future__ import annotations


class PtahError(Exception):
    """Base of every error the operator raises on purpose."""


class InvalidInput(PtahError):
    """An input was refused; nothing was computed from it, and nothing was truncated."""


class BuildRefused(InvalidInput):
    """The builder refused to build the operation Job from the given claim."""
