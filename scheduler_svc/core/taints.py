"""Taints and tolerations, with kube-scheduler's matching rules."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum


class TaintEffect(StrEnum):
    """What a taint does to pods that do not tolerate it."""

    NO_SCHEDULE = "NoSchedule"
    PREFER_NO_SCHEDULE = "PreferNoSchedule"
    NO_EXECUTE = "NoExecute"


@dataclass(frozen=True)
class Taint:
    """``key=value:effect`` on a node or NodePool."""

    key: str
    effect: TaintEffect
    value: str = ""

    def describe(self) -> str:
        """``team=ml:NoSchedule`` (``key:effect`` without a value)."""
        value = f"={self.value}" if self.value else ""
        return f"{self.key}{value}:{self.effect}"


@dataclass(frozen=True)
class Toleration:
    """A pod's toleration. Empty ``key`` with Exists tolerates every taint; empty ``effect``
    matches every effect."""

    key: str = ""
    operator: str = "Equal"  # Equal | Exists
    value: str = ""
    effect: TaintEffect | None = None

    def tolerates(self, taint: Taint) -> bool:
        """kube-scheduler's ToleratesTaint."""
        if self.effect is not None and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        return bool(self.key) and self.value == taint.value


def blocking(taint: Taint) -> bool:
    """Whether the taint keeps untolerating pods off (PreferNoSchedule only scores)."""
    return taint.effect is not TaintEffect.PREFER_NO_SCHEDULE


def first_untolerated(
    tolerations: Iterable[Toleration], taints: Iterable[Taint], *, preferences: bool = False
) -> Taint | None:
    """The first blocking taint none of the tolerations tolerates (None: all tolerated);
    ``preferences``: PreferNoSchedule taints block too (Karpenter avoids them until its last
    relaxation)."""
    held = tuple(tolerations)
    for taint in taints:
        if (preferences or blocking(taint)) and not any(t.tolerates(taint) for t in held):
            return taint
    return None
