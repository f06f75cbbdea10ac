"""Label requirements and their algebra (NodePool, NodeClaim, node affinity, label selectors).

A ``Requirement`` is what users write (``key``, ``operator``, ``values``, ``minValues``). The
solver works on ``ValueSet`` (the set of label values, or absence, a requirement admits) and
``Requirements`` (a conjunction keyed by label), which intersect in O(keys).

Semantics follow Kubernetes node affinity (In, NotIn, Exists, DoesNotExist, Gt, Lt: NotIn and
DoesNotExist admit a missing label, the others do not) plus Karpenter's Gte/Lte on NodePools.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum

LABEL_INSTANCE_TYPE = "node.kubernetes.io/instance-type"
LABEL_ZONE = "topology.kubernetes.io/zone"
#: The zone's AWS-wide id (``use1-az1``): the same physical zone in every account, where zone
#: names are shuffled per account (Karpenter AWS ``LabelTopologyZoneID``).
LABEL_ZONE_ID = "topology.k8s.aws/zone-id"
LABEL_REGION = "topology.kubernetes.io/region"
LABEL_CAPACITY_TYPE = "karpenter.sh/capacity-type"
LABEL_ARCH = "kubernetes.io/arch"
LABEL_OS = "kubernetes.io/os"
LABEL_HOSTNAME = "kubernetes.io/hostname"
LABEL_NODEPOOL = "daiku.dev/nodepool"
LABEL_KARPENTER_NODEPOOL = "karpenter.sh/nodepool"
INSTANCE_LABEL_PREFIX = "karpenter.k8s.aws/instance-"

CAPACITY_TYPE_SPOT = "spot"
CAPACITY_TYPE_ON_DEMAND = "on-demand"

#: Labels every node daiku launches carries, whatever the NodePool says: a pod may require them
#: even when its NodePool does not mention them (instance types and offerings supply them).
WELL_KNOWN_LABELS = frozenset(
    {
        LABEL_INSTANCE_TYPE,
        LABEL_ZONE,
        LABEL_REGION,
        LABEL_CAPACITY_TYPE,
        LABEL_ARCH,
        LABEL_OS,
        LABEL_HOSTNAME,
        LABEL_NODEPOOL,
        LABEL_KARPENTER_NODEPOOL,
    }
)


#: Deprecated aliases of node labels, as Karpenter normalises them in pod and NodePool
#: requirements (kubernetes-sigs/karpenter ``NormalizedLabels``; the AWS provider adds the EBS
#: CSI driver's zone key): a pod selecting the old name selects the current one.
LABEL_ALIASES = {
    "beta.kubernetes.io/arch": LABEL_ARCH,
    "beta.kubernetes.io/os": LABEL_OS,
    "beta.kubernetes.io/instance-type": LABEL_INSTANCE_TYPE,
    "failure-domain.beta.kubernetes.io/zone": LABEL_ZONE,
    "failure-domain.beta.kubernetes.io/region": LABEL_REGION,
    "topology.ebs.csi.aws.com/zone": LABEL_ZONE,
}


def is_well_known(key: str) -> bool:
    """Whether instance types, offerings or the launch itself give a node this label."""
    return key in WELL_KNOWN_LABELS or key.startswith(INSTANCE_LABEL_PREFIX)


class Operator(StrEnum):
    """Requirement operators (node affinity's six plus Karpenter's Gte and Lte)."""

    IN = "In"
    NOT_IN = "NotIn"
    EXISTS = "Exists"
    DOES_NOT_EXIST = "DoesNotExist"
    GT = "Gt"
    LT = "Lt"
    GTE = "Gte"
    LTE = "Lte"


_NEEDS_VALUES = {Operator.IN, Operator.NOT_IN}
_NEEDS_ONE_INTEGER = {Operator.GT, Operator.LT, Operator.GTE, Operator.LTE}


class RequirementError(ValueError):
    """A requirement that cannot mean anything (the message names key and operator)."""


@dataclass(frozen=True)
class Requirement:
    """One requirement as written: ``key operator values`` (``min_values`` for NodePools)."""

    key: str
    operator: Operator
    values: tuple[str, ...] = ()
    min_values: int | None = None

    def __post_init__(self) -> None:
        if self.operator in _NEEDS_VALUES and not self.values:
            raise RequirementError(f"{self.key} {self.operator}: needs at least one value")
        if self.operator in {Operator.EXISTS, Operator.DOES_NOT_EXIST} and self.values:
            raise RequirementError(f"{self.key} {self.operator}: takes no values")
        if self.operator in _NEEDS_ONE_INTEGER and (
            len(self.values) != 1 or not _is_integer(self.values[0])
        ):
            raise RequirementError(f"{self.key} {self.operator}: needs exactly one integer")

    def value_set(self) -> ValueSet:  # noqa: PLR0911 - one return per operator reads best
        """The label values (and absence) this requirement admits."""
        op = self.operator
        if op is Operator.IN:
            return ValueSet(allows_absent=False, complement=False, values=frozenset(self.values))
        if op is Operator.NOT_IN:
            return ValueSet(allows_absent=True, complement=True, values=frozenset(self.values))
        if op is Operator.EXISTS:
            return ANY_PRESENT
        if op is Operator.DOES_NOT_EXIST:
            return ValueSet(allows_absent=True, complement=False, values=frozenset())
        bound = int(self.values[0])
        if op is Operator.GT:
            return ValueSet(False, True, frozenset(), greater_than=bound)
        if op is Operator.GTE:
            return ValueSet(False, True, frozenset(), greater_than=bound - 1)
        if op is Operator.LT:
            return ValueSet(False, True, frozenset(), less_than=bound)
        return ValueSet(False, True, frozenset(), less_than=bound + 1)

    def describe(self) -> str:
        """``key In [a, b]`` as a person reads it."""
        if self.values:
            return f"{self.key} {self.operator} [{', '.join(self.values)}]"
        return f"{self.key} {self.operator}"


def _is_integer(text: str) -> bool:
    try:
        int(text)
    except ValueError:
        return False
    return True


@dataclass(frozen=True)
class ValueSet:
    """The values of one label a requirement admits.

    ``complement`` False: exactly ``values``; True: every value except ``values``. Integer
    bounds (``greater_than`` < value < ``less_than``) restrict further (non-integers fail
    them). ``allows_absent``: a node without the label satisfies it.
    """

    allows_absent: bool
    complement: bool
    values: frozenset[str]
    greater_than: int | None = None
    less_than: int | None = None

    def allows(self, value: str | None) -> bool:
        """Whether a node whose label is ``value`` (None: absent) satisfies this set."""
        if value is None:
            return self.allows_absent
        if (value in self.values) == self.complement:
            return False
        if self.greater_than is None and self.less_than is None:
            return True
        try:
            number = int(value)
        except ValueError:
            return False
        if self.greater_than is not None and number <= self.greater_than:
            return False
        return self.less_than is None or number < self.less_than

    def intersect(self, other: ValueSet) -> ValueSet:
        """Values both admit."""
        absent = self.allows_absent and other.allows_absent
        greater = _max_bound(self.greater_than, other.greater_than)
        less = _min_bound(self.less_than, other.less_than)
        if not self.complement and not other.complement:
            values, complement = self.values & other.values, False
        elif not self.complement:
            values, complement = self.values - other.values, False
        elif not other.complement:
            values, complement = other.values - self.values, False
        else:
            values, complement = self.values | other.values, True
        if not complement:
            bounded = ValueSet(False, True, frozenset(), greater, less)
            values = frozenset(v for v in values if bounded.allows(v))
            greater = less = None
        return ValueSet(absent, complement, values, greater, less)

    def has_any_value(self) -> bool:
        """Whether some present label value satisfies the set."""
        if not self.complement:
            return bool(self.values)
        if self.greater_than is not None and self.less_than is not None:
            return self.less_than - self.greater_than > 1
        return True

    def is_empty(self) -> bool:
        """Whether no node at all (with or without the label) satisfies the set."""
        return not self.allows_absent and not self.has_any_value()

    def single_value(self) -> str | None:
        """The only value admitted, when the label must be present with exactly one value."""
        if not self.complement and not self.allows_absent and len(self.values) == 1:
            return next(iter(self.values))
        return None

    def finite_values(self) -> frozenset[str] | None:
        """The admitted values when they are a finite list, else None."""
        return None if self.complement else self.values

    def describe(self, key: str) -> str:
        """A person's reading: ``zone In [a, b]``, ``arch NotIn [arm64]``, ``cpu > 4``."""
        parts: list[str] = []
        if not self.complement:
            parts.append(
                f"{key} In [{', '.join(sorted(self.values))}]"
                if self.values
                else f"{key} DoesNotExist"
            )
        elif self.values:
            parts.append(f"{key} NotIn [{', '.join(sorted(self.values))}]")
        if self.greater_than is not None:
            parts.append(f"{key} > {self.greater_than}")
        if self.less_than is not None:
            parts.append(f"{key} < {self.less_than}")
        if not parts:
            parts.append(f"{key} Exists")
        return " and ".join(parts)


def _max_bound(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)


def _min_bound(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else min(a, b)


ANY_PRESENT = ValueSet(allows_absent=False, complement=True, values=frozenset())


@dataclass(frozen=True)
class Requirements:
    """A conjunction of value sets keyed by label (sorted, so equal sets hash equal)."""

    items: tuple[tuple[str, ValueSet], ...] = ()

    def __hash__(self) -> int:
        # Requirements key the solver's caches; hashing the nested tuples every time is
        # measurable, so the hash is computed once per object.
        cached: int | None = self.__dict__.get("_hash")
        if cached is None:
            cached = hash(self.items)
            object.__setattr__(self, "_hash", cached)
        return cached

    @staticmethod
    def of(requirements: Iterable[Requirement]) -> Requirements:
        """The conjunction of written requirements (several on one key intersect)."""
        merged: dict[str, ValueSet] = {}
        for requirement in requirements:
            value_set = requirement.value_set()
            current = merged.get(requirement.key)
            merged[requirement.key] = value_set if current is None else current.intersect(value_set)
        return Requirements(tuple(sorted(merged.items())))

    @staticmethod
    def from_labels(labels: Mapping[str, str]) -> Requirements:
        """``key In [value]`` for every label."""
        return Requirements(
            tuple(
                (key, ValueSet(False, False, frozenset({value})))
                for key, value in sorted(labels.items())
            )
        )

    def as_dict(self) -> dict[str, ValueSet]:
        """The value sets keyed by label."""
        return dict(self.items)

    def get(self, key: str) -> ValueSet | None:
        """The value set for ``key``, None when unconstrained."""
        for item_key, value_set in self.items:
            if item_key == key:
                return value_set
        return None

    def intersect(self, other: Requirements) -> Requirements:
        """Both conjunctions at once."""
        if not other.items:
            return self
        if not self.items:
            return other
        merged = dict(self.items)
        for key, value_set in other.items:
            current = merged.get(key)
            merged[key] = value_set if current is None else current.intersect(value_set)
        return Requirements(tuple(sorted(merged.items())))

    def conflict(self, other: Requirements) -> str | None:
        """Why a node shaped by ``other`` can never satisfy ``self`` (None: it can).

        ``self`` is what a pod requires; ``other`` what a NodePool or NodeClaim defines. A key
        ``other`` leaves open conflicts only when ``self`` insists on the label being there and
        it is not one of the well-known labels every launched node gets.
        """
        theirs = dict(other.items)
        for key, mine in self.items:
            their = theirs.get(key)
            if their is None:
                if not mine.allows_absent and not is_well_known(key):
                    return f"requires {mine.describe(key)} but the NodePool does not set {key}"
                continue
            if mine.intersect(their).is_empty():
                return f"requires {mine.describe(key)} but the NodePool has {their.describe(key)}"
        return None

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether a node (or pod) with these labels satisfies every requirement."""
        return all(value_set.allows(labels.get(key)) for key, value_set in self.items)

    def first_unmet(self, labels: Mapping[str, str]) -> str | None:
        """The first requirement these labels fail, as a person reads it."""
        for key, value_set in self.items:
            if not value_set.allows(labels.get(key)):
                return value_set.describe(key)
        return None

    def to_requirements(self) -> tuple[Requirement, ...]:
        """Back to written form (bounds become Gt/Lt; for reporting)."""
        out: list[Requirement] = []
        for key, vs in self.items:
            if not vs.complement:
                if vs.values:
                    out.append(Requirement(key, Operator.IN, tuple(sorted(vs.values))))
                else:
                    out.append(Requirement(key, Operator.DOES_NOT_EXIST))
                continue
            if vs.values:
                out.append(Requirement(key, Operator.NOT_IN, tuple(sorted(vs.values))))
            # NotIn alone admits a node without the label; a set that does not says Exists too.
            if not vs.allows_absent and vs.greater_than is None and vs.less_than is None:
                out.append(Requirement(key, Operator.EXISTS))
            if vs.greater_than is not None:
                out.append(Requirement(key, Operator.GT, (str(vs.greater_than),)))
            if vs.less_than is not None:
                out.append(Requirement(key, Operator.LT, (str(vs.less_than),)))
        return tuple(out)


def contradiction(requirements: Iterable[Requirement], labels: Mapping[str, str]) -> str | None:
    """Why no node can carry these labels and meet these requirements together (None: some
    node can): the requirements on one key admit no value (a label every launched node gets,
    or one the requirements insist on), or a label's value is one they exclude."""
    written = tuple(requirements)
    for key, value_set in Requirements.of(written).items:
        must_have_label = is_well_known(key) or not value_set.allows_absent
        if not value_set.has_any_value() and must_have_label:
            terms = ", ".join(r.describe() for r in written if r.key == key)
            return f"the requirements on {key} admit no value ({terms})"
        if key in labels and not value_set.allows(labels[key]):
            return f"label {key}={labels[key]} is excluded by {value_set.describe(key)}"
    return None
