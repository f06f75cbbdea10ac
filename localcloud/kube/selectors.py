"""Label and field selectors, parsed once and matched against JSON-like objects.

Label selector grammar (as `kubectl -l` and client libraries send it): comma-separated
requirements `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k` (exists), `!k` (does not
exist). Field selectors: `path=v`, `path==v`, `path!=v` where path is a dotted field path such as
`metadata.name`, `spec.nodeName`, `status.phase`, `spec.unschedulable`; a missing field reads as
the empty string and booleans read as `true`/`false`, as the real apiserver's field sets do.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from localcloud.kube.errors import BadRequest

_SET_REQUIREMENT = re.compile(r"^\s*([^\s!=,()]+)\s+(in|notin)\s+\(([^)]*)\)\s*$")
_EQ_REQUIREMENT = re.compile(r"^\s*([^\s!=,()]+)\s*(==|=|!=)\s*([^\s,()]*)\s*$")
_EXISTS_REQUIREMENT = re.compile(r"^\s*(!?)\s*([^\s!=,()]+)\s*$")


@dataclass(frozen=True, slots=True)
class Requirement:
    """One clause of a selector: operator is one of in, notin, exists, !exists."""

    key: str
    operator: str
    values: frozenset[str] = frozenset()

    def matches(self, value: str | None) -> bool:
        if self.operator == "in":
            return value is not None and value in self.values
        if self.operator == "notin":
            return value is None or value not in self.values
        if self.operator == "exists":
            return value is not None
        return value is None  # "!exists"


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A conjunction of requirements; the empty selector matches everything."""

    requirements: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        labels = labels or {}
        return all(r.matches(labels.get(r.key)) for r in self.requirements)

    @property
    def is_empty(self) -> bool:
        return not self.requirements


def _split_top_level(text: str) -> list[str]:
    """Split on commas outside parentheses: `a in (x,y),b` -> [`a in (x,y)`, `b`]."""
    parts: list[str] = []
    depth = 0
    current: list[str] = []
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return [p for p in parts if p.strip()]


def parse_label_selector(text: str | None) -> LabelSelector:
    """Parse `app=web,tier in (a,b),!canary`; raises BadRequest naming the bad clause."""
    if not text or not text.strip():
        return LabelSelector()
    requirements: list[Requirement] = []
    for clause in _split_top_level(text):
        if match := _SET_REQUIREMENT.match(clause):
            values = frozenset(v.strip() for v in match.group(3).split(",") if v.strip())
            requirements.append(Requirement(match.group(1), match.group(2), values))
        elif match := _EQ_REQUIREMENT.match(clause):
            op = "notin" if match.group(2) == "!=" else "in"
            requirements.append(Requirement(match.group(1), op, frozenset({match.group(3)})))
        elif match := _EXISTS_REQUIREMENT.match(clause):
            op = "!exists" if match.group(1) else "exists"
            requirements.append(Requirement(match.group(2), op))
        else:
            raise BadRequest(f"unable to parse requirement: {clause.strip()!r} in {text!r}")
    return LabelSelector(tuple(requirements))


def label_selector_from_object(selector: Mapping[str, Any] | None) -> LabelSelector:
    """Convert a `metav1.LabelSelector` (matchLabels + matchExpressions) to a LabelSelector."""
    if not selector:
        return LabelSelector()
    requirements = [
        Requirement(str(k), "in", frozenset({str(v)}))
        for k, v in (selector.get("matchLabels") or {}).items()
    ]
    operators = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!exists"}
    for expression in selector.get("matchExpressions") or []:
        operator = operators.get(str(expression.get("operator")))
        if operator is None:
            raise BadRequest(f"invalid label selector operator {expression.get('operator')!r}")
        values = frozenset(str(v) for v in expression.get("values") or [])
        requirements.append(Requirement(str(expression.get("key")), operator, values))
    return LabelSelector(tuple(requirements))


def label_selector_to_string(selector: Mapping[str, Any] | None) -> str:
    """Render a `metav1.LabelSelector` as the string form (used by the Scale subresource)."""
    parts = [f"{k}={v}" for k, v in sorted((selector or {}).get("matchLabels", {}).items())]
    for expression in (selector or {}).get("matchExpressions") or []:
        key, operator = expression.get("key"), expression.get("operator")
        values = ",".join(sorted(expression.get("values") or []))
        if operator == "In":
            parts.append(f"{key} in ({values})")
        elif operator == "NotIn":
            parts.append(f"{key} notin ({values})")
        elif operator == "Exists":
            parts.append(str(key))
        elif operator == "DoesNotExist":
            parts.append(f"!{key}")
    return ",".join(parts)


@dataclass(frozen=True, slots=True)
class FieldRequirement:
    path: tuple[str, ...]
    value: str
    negate: bool

    def matches(self, obj: Mapping[str, Any]) -> bool:
        return (field_value(obj, self.path) == self.value) != self.negate


@dataclass(frozen=True, slots=True)
class FieldSelector:
    requirements: tuple[FieldRequirement, ...] = ()

    def matches(self, obj: Mapping[str, Any]) -> bool:
        return all(r.matches(obj) for r in self.requirements)

    @property
    def is_empty(self) -> bool:
        return not self.requirements

    @property
    def labels(self) -> tuple[str, ...]:
        """The field paths the selector names (`spec.nodeName`, ...)."""
        return tuple(".".join(r.path) for r in self.requirements)

    def exact(self, field: str) -> str | None:
        """The value this selector pins `field` to with `=`, if it does (used for indexes)."""
        path = tuple(field.split("."))
        for r in self.requirements:
            if r.path == path and not r.negate:
                return r.value
        return None


def field_value(obj: Mapping[str, Any], path: tuple[str, ...]) -> str:
    current: Any = obj
    for part in path:
        if not isinstance(current, Mapping):
            return ""
        current = current.get(part)
    if current is None:
        # spec.unschedulable and friends: the apiserver's field set prints an unset bool
        return "false" if path and path[-1] == "unschedulable" else ""
    if isinstance(current, bool):
        return "true" if current else "false"
    return str(current)


def parse_field_selector(text: str | None) -> FieldSelector:
    """Parse `spec.nodeName=n1,status.phase!=Succeeded`; raises BadRequest on bad syntax."""
    if not text or not text.strip():
        return FieldSelector()
    requirements: list[FieldRequirement] = []
    for clause in text.split(","):
        if not clause.strip():
            continue
        match = _EQ_REQUIREMENT.match(clause)
        if match is None:
            raise BadRequest(f"invalid field selector: {clause.strip()!r} in {text!r}")
        path = tuple(match.group(1).split("."))
        requirements.append(FieldRequirement(path, match.group(3), match.group(2) == "!="))
    return FieldSelector(tuple(requirements))
