"""A NodePool's disruption settings (Karpenter v1 meaning), parsed from its spec.

``spec.disruption.{consolidationPolicy, consolidateAfter, budgets}`` and
``spec.template.spec.{expireAfter, terminationGracePeriod}``. Durations are seconds; ``None``
stands for ``Never``. Bad input raises ``DisruptionSettingsError`` naming the NodePool and field.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from croniter import croniter


class DisruptionSettingsError(ValueError):
    """A NodePool's disruption settings cannot be read (the message names object and field)."""


class ConsolidationPolicy(StrEnum):
    """Which nodes consolidation may act on."""

    WHEN_EMPTY = "WhenEmpty"
    WHEN_EMPTY_OR_UNDERUTILIZED = "WhenEmptyOrUnderutilized"
    # Karpenter v1.14: underutilized nodes too, but only moves whose saving justifies their
    # disruption (``balanced``).
    BALANCED = "Balanced"

    @property
    def consolidates_underutilized(self) -> bool:
        """Whether nodes with pods are consolidated at all (not only empty ones)."""
        return self is not ConsolidationPolicy.WHEN_EMPTY


# Karpenter's consolidationThreshold: integers 1-3, default 2 (a move passes when its
# disruption fraction is at most k times its saving fraction).
CONSOLIDATION_THRESHOLDS = (1, 2, 3)
DEFAULT_CONSOLIDATION_THRESHOLD = 2


class RebalanceRecommendationPolicy(StrEnum):
    """What an EC2 rebalance recommendation for one of the NodePool's spot nodes does
    (``spec.disruption.rebalanceRecommendationPolicy``; daiku's own field, decision 0015)."""

    IGNORE = "Ignore"  # an Event only, as Karpenter
    REPLACE = "Replace"  # launch the replacement first, then drain, within budgets


class DisruptionReason(StrEnum):
    """Why a node is disrupted; budgets name the first three."""

    EMPTY = "Empty"
    DRIFTED = "Drifted"
    UNDERUTILIZED = "Underutilized"
    EXPIRED = "Expired"
    # Not budget reasons: node repair acts whatever the budgets say (as Karpenter's), and a
    # rebalance recommendation obeys the budgets that name no reason (as expiry does).
    UNHEALTHY = "Unhealthy"
    REBALANCE_RECOMMENDED = "RebalanceRecommended"


BUDGET_REASONS = frozenset(
    {DisruptionReason.EMPTY, DisruptionReason.DRIFTED, DisruptionReason.UNDERUTILIZED}
)
DEFAULT_EXPIRE_AFTER_SECONDS = 720 * 3600.0
_DURATION = re.compile(r"^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")
_NODES = re.compile(r"^(?:(100|\d{1,2})%|(\d+))$")
# croniter accepts the same @-macros Karpenter (robfig/cron) does.
_MACROS = {
    "@annually": "0 0 1 1 *",
    "@yearly": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}


def parse_duration(text: str, where: str, *, allow_never: bool = True) -> float | None:
    """``1h30m``/``30s``/``0s`` -> seconds; ``Never`` -> None (when allowed)."""
    if allow_never and text == "Never":
        return None
    match = _DURATION.match(text) if text else None
    if match is None or not any(match.groups()):
        never = " or Never" if allow_never else ""
        raise DisruptionSettingsError(f"{where}: {text!r} is not a duration like 1h30m{never}")
    hours, minutes, seconds = (int(g) if g else 0 for g in match.groups())
    return float(hours * 3600 + minutes * 60 + seconds)


_GO_DURATION = re.compile(r"((?:\d+(?:\.\d*)?|\.\d+))(ns|us|µs|ms|s|m|h)")
_GO_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_go_duration(text: str) -> float | None:
    """Go's ``time.ParseDuration`` (``4h``, ``1h30m``, ``1.5h``, ``300ms``) in seconds; None
    when ``text`` is not one (Karpenter parses the do-not-disrupt annotation's value so)."""
    body = text[1:] if text[:1] in "+-" else text
    if body == "0":
        return 0.0
    if not body or _GO_DURATION.sub("", body):
        return None
    seconds = sum(float(n) * _GO_UNITS[u] for n, u in _GO_DURATION.findall(body))
    return -seconds if text.startswith("-") else seconds


@dataclass(frozen=True)
class Budget:
    """At most ``nodes`` (count, or ``percent`` of the NodePool's nodes, rounded up) disrupted
    at once, for ``reasons`` (empty: every reason), while active: always, or for
    ``duration_seconds`` after each hit of the 5-field cron ``schedule`` (UTC)."""

    nodes: int | None = None
    percent: int | None = 10
    schedule: str | None = None
    duration_seconds: float | None = None
    reasons: frozenset[DisruptionReason] = frozenset()

    def __post_init__(self) -> None:
        if (self.nodes is None) == (self.percent is None):
            raise DisruptionSettingsError("budget: exactly one of nodes and percent is set")
        if (self.schedule is None) != (self.duration_seconds is None):
            raise DisruptionSettingsError("budget: schedule must be set with duration")
        if self.schedule is not None and (
            len(_cron(self.schedule).split()) != 5 or not croniter.is_valid(_cron(self.schedule))
        ):
            raise DisruptionSettingsError(
                f"budget: schedule {self.schedule!r} is not a 5-field cron"
            )

    def describe(self) -> str:
        """``nodes: 10%`` (with its schedule and reasons when set)."""
        text = f"nodes: {self.nodes}" if self.nodes is not None else f"nodes: {self.percent}%"
        if self.schedule is not None:
            text += f" (schedule {self.schedule!r} for {_format_seconds(self.duration_seconds)})"
        if self.reasons:
            text += f" for {', '.join(sorted(self.reasons))}"
        return text

    def applies_to(self, reason: DisruptionReason) -> bool:
        """Whether it limits ``reason`` (reason-less budgets limit every reason)."""
        return not self.reasons or reason in self.reasons

    def is_active(self, now: datetime) -> bool:
        """Whether a schedule hit lies within ``duration`` before ``now`` (or no schedule)."""
        if self.schedule is None or self.duration_seconds is None:
            return True
        since = now - timedelta(seconds=self.duration_seconds)
        # The first hit strictly after the window opens; active when it is not in the future.
        next_hit: datetime = croniter(_cron(self.schedule), since).get_next(datetime)
        return next_hit <= now

    def allowed(self, total_nodes: int) -> int:
        """How many of ``total_nodes`` it lets be disrupted at once."""
        if self.nodes is not None:
            return self.nodes
        assert self.percent is not None
        return math.ceil(total_nodes * self.percent / 100)


DEFAULT_BUDGETS: tuple[Budget, ...] = (Budget(percent=10),)


@dataclass(frozen=True)
class DisruptionSettings:
    """One NodePool's disruption settings; ``None`` seconds mean ``Never``."""

    consolidation_policy: ConsolidationPolicy = ConsolidationPolicy.WHEN_EMPTY_OR_UNDERUTILIZED
    consolidate_after_seconds: float | None = 0.0
    expire_after_seconds: float | None = DEFAULT_EXPIRE_AFTER_SECONDS
    termination_grace_period_seconds: float | None = None
    budgets: tuple[Budget, ...] = DEFAULT_BUDGETS
    rebalance_policy: RebalanceRecommendationPolicy = RebalanceRecommendationPolicy.IGNORE
    consolidation_threshold: int = DEFAULT_CONSOLIDATION_THRESHOLD
    # spec.disruption.doNotDisruptGracePeriod (daiku's, decision 0016): how long a
    # do-not-disrupt pod may hold an expired or drifted node (None: for as long as it says).
    do_not_disrupt_grace_period_seconds: float | None = None

    @staticmethod
    def from_spec(nodepool: str, spec: Mapping[str, Any]) -> DisruptionSettings:
        """From a NodePool's ``spec`` (CRD defaults for what is left out)."""
        where = f"NodePool {nodepool}"
        disruption = _mapping(spec.get("disruption", {}), f"{where}: spec.disruption")
        template = _mapping(spec.get("template", {}), f"{where}: spec.template")
        template_spec = _mapping(template.get("spec", {}), f"{where}: spec.template.spec")
        policy_text = disruption.get("consolidationPolicy", "WhenEmptyOrUnderutilized")
        try:
            policy = ConsolidationPolicy(policy_text)
        except ValueError:
            raise DisruptionSettingsError(
                f"{where}: spec.disruption.consolidationPolicy: {policy_text!r} is not one of "
                "WhenEmpty, WhenEmptyOrUnderutilized, Balanced"
            ) from None
        threshold = _threshold(disruption, policy, where)
        consolidate_after = parse_duration(
            str(disruption.get("consolidateAfter", "0s")),
            f"{where}: spec.disruption.consolidateAfter",
        )
        if spec.get("replicas") is not None:
            # A static NodePool's nodes are never consolidated (Karpenter ignores its
            # consolidation fields); drift and expiry still replace them, within budgets.
            consolidate_after = None
        expire_after = parse_duration(
            str(template_spec.get("expireAfter", "720h")),
            f"{where}: spec.template.spec.expireAfter",
        )
        grace = template_spec.get("terminationGracePeriod")
        grace_seconds = (
            None
            if grace is None
            else parse_duration(
                str(grace),
                f"{where}: spec.template.spec.terminationGracePeriod",
                allow_never=False,
            )
        )
        raw_budgets = disruption.get("budgets")
        if raw_budgets is None:
            budgets = DEFAULT_BUDGETS
        elif not isinstance(raw_budgets, list):
            raise DisruptionSettingsError(f"{where}: spec.disruption.budgets: expected a list")
        else:
            budgets = tuple(
                _budget(item, f"{where}: spec.disruption.budgets[{i}]")
                for i, item in enumerate(raw_budgets)
            )
        rebalance_text = disruption.get("rebalanceRecommendationPolicy", "Ignore")
        try:
            rebalance = RebalanceRecommendationPolicy(rebalance_text)
        except ValueError:
            raise DisruptionSettingsError(
                f"{where}: spec.disruption.rebalanceRecommendationPolicy: {rebalance_text!r} is "
                "not one of Ignore, Replace"
            ) from None
        hold = disruption.get("doNotDisruptGracePeriod")
        hold_seconds = (
            None
            if hold is None
            else parse_duration(
                str(hold), f"{where}: spec.disruption.doNotDisruptGracePeriod", allow_never=False
            )
        )
        return DisruptionSettings(
            policy,
            consolidate_after,
            expire_after,
            grace_seconds,
            budgets,
            rebalance_policy=rebalance,
            consolidation_threshold=threshold,
            do_not_disrupt_grace_period_seconds=hold_seconds,
        )


def _threshold(disruption: Mapping[str, Any], policy: ConsolidationPolicy, where: str) -> int:
    """``consolidationThreshold``: only with ``Balanced`` (as Karpenter's CEL rule), 1-3."""
    field_name = f"{where}: spec.disruption.consolidationThreshold"
    value = disruption.get("consolidationThreshold")
    if value is None:
        return DEFAULT_CONSOLIDATION_THRESHOLD
    if policy is not ConsolidationPolicy.BALANCED:
        raise DisruptionSettingsError(
            f"{field_name}: only allowed with consolidationPolicy Balanced"
        )
    if isinstance(value, bool) or value not in CONSOLIDATION_THRESHOLDS:
        raise DisruptionSettingsError(f"{field_name}: {value!r} is not one of 1, 2, 3")
    return int(value)


def _budget(item: object, where: str) -> Budget:
    spec = _mapping(item, where)
    nodes_text = str(spec.get("nodes", "10%"))
    match = _NODES.match(nodes_text)
    if match is None:
        raise DisruptionSettingsError(f"{where}.nodes: {nodes_text!r} is not a count or 0-100%")
    percent, count = match.groups()
    schedule = spec.get("schedule")
    duration_text = spec.get("duration")
    duration = (
        None
        if duration_text is None
        else parse_duration(str(duration_text), f"{where}.duration", allow_never=False)
    )
    reasons: set[DisruptionReason] = set()
    for reason in spec.get("reasons") or ():
        if reason not in BUDGET_REASONS:
            raise DisruptionSettingsError(
                f"{where}.reasons: {reason!r} is not one of Drifted, Empty, Underutilized"
            )
        reasons.add(DisruptionReason(reason))
    try:
        return Budget(
            nodes=int(count) if count is not None else None,
            percent=int(percent) if percent is not None else None,
            schedule=None if schedule is None else str(schedule),
            duration_seconds=duration,
            reasons=frozenset(reasons),
        )
    except DisruptionSettingsError as error:
        raise DisruptionSettingsError(f"{where}: {str(error).removeprefix('budget: ')}") from None


def _mapping(value: object, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise DisruptionSettingsError(f"{where}: expected an object")
    return value


def _cron(schedule: str) -> str:
    return _MACROS.get(schedule, schedule)


def _format_seconds(seconds: float | None) -> str:
    if seconds is None:
        return "Never"
    whole = int(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    text = (f"{hours}h" if hours else "") + (f"{minutes}m" if minutes else "")
    return text + (f"{secs}s" if secs or not text else "")


format_seconds = _format_seconds
