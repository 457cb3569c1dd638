"""PtahRealm: which namespaces may change one database, and whether they may share it.

A realm is the one way two namespaces share a database (a ``coordinationKey`` is
scoped to its namespace): resources naming one realm serialize on one Lease. Without
an object that says who may name it, any namespace could take turns on another
team's database Lease. A realm is cluster-scoped and written by a platform team;
the controller reads it uncached before every Lease step and never takes the Lease
for a resource the realm does not admit.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StringConstraints

from jobclaim.api._base import WireModel
from jobclaim.api.common import Engine
from jobclaim.api.meta import Condition, ObjectMeta

# A namespace name is a DNS label.
NamespaceName = Annotated[
    str, StringConstraints(min_length=1, max_length=63, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
]
LabelKey = Annotated[str, StringConstraints(min_length=1, max_length=317)]
LabelValue = Annotated[str, StringConstraints(max_length=63)]
Sharing = Literal["Exclusive", "Shared"]
SelectorOperator = Literal["In", "NotIn", "Exists", "DoesNotExist"]


class LabelSelectorRequirement(WireModel):
    """One requirement on a namespace's labels, as Kubernetes' label selectors spell it."""

    key: LabelKey
    """The label key the requirement is about."""
    operator: SelectorOperator
    """In, NotIn, Exists or DoesNotExist."""
    values: list[LabelValue] = Field(default_factory=list, max_length=64)
    """The values In and NotIn compare with; empty for Exists and DoesNotExist."""


class NamespaceSelector(WireModel):
    """Namespaces by their labels: every matchLabels pair and every expression must hold."""

    match_labels: dict[str, LabelValue] = Field(default_factory=dict, max_length=32)
    """Labels a namespace must carry, with these values."""
    match_expressions: list[LabelSelectorRequirement] = Field(default_factory=list, max_length=32)
    """Requirements a namespace's labels must all meet."""


class PtahRealmSpec(WireModel):
    """The database a realm stands for and who may change it."""

    engine: Engine
    """The database engine every resource naming this realm must declare."""
    namespaces: list[NamespaceName] = Field(default_factory=list, max_length=256)
    """Namespaces admitted by name."""
    namespace_selector: NamespaceSelector | None = None
    """Namespaces admitted by their labels, beside those named; absent admits none by label,
    and an empty selector admits none either (a realm admitting every namespace is written
    out, not implied)."""
    sharing: Sharing = "Exclusive"
    """Exclusive: at most one resource may name the realm. Shared: several may, when every
    one of them sets spec.target.sharedRealm."""


class PtahRealmStatus(WireModel):
    """What the controller last said about the realm."""

    observed_generation: int | None = None
    """The metadata.generation the status was written from."""
    conditions: list[Condition] = Field(default_factory=list)
    """RealmConflict: the controller's last census of the resources naming the realm (True
    while more of them name it than the realm's sharing allows, and nothing runs)."""


class PtahRealm(WireModel):
    api_version: Literal["operator.ptah.run/v1alpha1"] = "operator.ptah.run/v1alpha1"
    kind: Literal["PtahRealm"] = "PtahRealm"
    metadata: ObjectMeta
    spec: PtahRealmSpec
    status: PtahRealmStatus | None = None
