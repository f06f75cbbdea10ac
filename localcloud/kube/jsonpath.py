"""Kubernetes JSONPath (k8s.io/client-go/util/jsonpath), the subset printer columns use.

Supported: `.field` with `\\.`-escaped dots (`.metadata.labels.node\\.kubernetes\\.io/zone`),
`['field']`, `[n]` / `[-n]`, `[start:end]`, `[*]` / `.*`, `..field` (recursive descent) and
filters `[?(@.path == "x")]` with `== != < <= > >=` or bare existence `[?(@.path)]`.
`find` returns every match in document order, as client-go's `FindResults` does; missing keys
match nothing (the apiserver's printer allows missing keys).
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from localcloud.kube.errors import BadRequest


@dataclass(frozen=True, slots=True)
class _Field:
    name: str
    recursive: bool = False

    def apply(self, value: Any) -> Iterator[Any]:
        if self.recursive:
            yield from _descend(value, self.name)
        elif isinstance(value, dict) and self.name in value:
            yield value[self.name]


@dataclass(frozen=True, slots=True)
class _Wildcard:
    def apply(self, value: Any) -> Iterator[Any]:
        if isinstance(value, dict):
            yield from value.values()
        elif isinstance(value, list):
            yield from value


@dataclass(frozen=True, slots=True)
class _Slice:
    start: int | None
    end: int | None
    single: bool  # [n] yields the element; [a:b] yields the range

    def apply(self, value: Any) -> Iterator[Any]:
        if not isinstance(value, list):
            return
        if not self.single:
            yield from value[self.start : self.end]
            return
        index = self.start or 0
        if -len(value) <= index < len(value):
            yield value[index]


@dataclass(frozen=True, slots=True)
class _Filter:
    path: tuple[Any, ...]
    compare: Callable[[Any, Any], bool] | None
    literal: Any

    def apply(self, value: Any) -> Iterator[Any]:
        if not isinstance(value, list):
            return
        for element in value:
            matches = list(_evaluate(self.path, [element]))
            if self.compare is None:
                if matches:
                    yield element
            elif any(_compares(self.compare, m, self.literal) for m in matches):
                yield element


_Step = _Field | _Wildcard | _Slice | _Filter

_OPERATORS: dict[str, Callable[[Any, Any], bool]] = {
    "==": operator.eq,
    "!=": operator.ne,
    "<=": operator.le,
    ">=": operator.ge,
    "<": operator.lt,
    ">": operator.gt,
}
_FILTER = re.compile(r"^\s*@(?P<path>[^=!<>]*?)\s*(?:(?P<op>==|!=|<=|>=|<|>)\s*(?P<lit>.+?))?\s*$")


def find(document: Any, path: str) -> list[Any]:
    """Every value `path` selects in `document`; BadRequest on a path this subset cannot read."""
    return list(_evaluate(_compile(path.strip()), [document]))


def first(document: Any, path: str) -> Any:
    """The first value `path` selects, or None."""
    for value in _evaluate(_compile(path.strip()), [document]):
        return value
    return None


def _evaluate(steps: tuple[_Step, ...], values: list[Any]) -> Iterator[Any]:
    for step in steps:
        values = [out for value in values for out in step.apply(value)]
    yield from values


def _compares(compare: Callable[[Any, Any], bool], left: Any, right: Any) -> bool:
    try:
        return compare(left, right)
    except TypeError:
        return False


def _descend(value: Any, name: str) -> Iterator[Any]:
    if isinstance(value, dict):
        if name == "*":
            yield from value.values()
        elif name in value:
            yield value[name]
        for child in value.values():
            yield from _descend(child, name)
    elif isinstance(value, list):
        for child in value:
            yield from _descend(child, name)


@lru_cache(maxsize=256)
def _compile(path: str) -> tuple[_Step, ...]:
    if path.startswith("{") and path.endswith("}"):
        path = path[1:-1].strip()
    path = path.removeprefix("$")
    steps: list[_Step] = []
    position = 0
    while position < len(path):
        char = path[position]
        if char == ".":
            recursive = path.startswith("..", position)
            position += 2 if recursive else 1
            name, position = _read_name(path, position)
            if name == "*" and not recursive:
                steps.append(_Wildcard())
            elif name:
                steps.append(_Field(name, recursive))
        elif char == "[":
            end = _closing_bracket(path, position)
            steps.append(_bracket(path[position + 1 : end].strip(), path))
            position = end + 1
        else:
            name, position = _read_name(path, position)
            if not name:
                raise BadRequest(f"unrecognized character in JSONPath {path!r}")
            steps.append(_Field(name))
    return tuple(steps)


def _read_name(path: str, position: int) -> tuple[str, int]:
    name = []
    while position < len(path) and path[position] not in ".[":
        if path[position] == "\\" and position + 1 < len(path):
            position += 1  # an escaped character (`\.`) belongs to the name
        name.append(path[position])
        position += 1
    return "".join(name), position


def _closing_bracket(path: str, start: int) -> int:
    depth, quote = 0, ""
    for index in range(start, len(path)):
        char = path[index]
        if quote:
            if char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
        elif char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
            if depth == 0:
                return index
    raise BadRequest(f"unclosed [ in JSONPath {path!r}")


def _bracket(inner: str, path: str) -> _Step:
    if inner == "*":
        return _Wildcard()
    if len(inner) >= 2 and inner[0] == inner[-1] and inner[0] in "'\"":
        return _Field(inner[1:-1])
    if inner.startswith("?"):
        return _filter(inner[1:].strip(), path)
    try:
        if ":" in inner:
            start, end = (part.strip() for part in inner.split(":", 1))
            return _Slice(int(start) if start else None, int(end) if end else None, single=False)
        return _Slice(int(inner), None, single=True)
    except ValueError:
        raise BadRequest(f"invalid array index {inner!r} in JSONPath {path!r}") from None


def _filter(expression: str, path: str) -> _Filter:
    if expression.startswith("(") and expression.endswith(")"):
        expression = expression[1:-1]
    match = _FILTER.match(expression)
    if match is None:
        raise BadRequest(f"invalid filter {expression!r} in JSONPath {path!r}")
    steps = _compile(match["path"].strip())
    if match["op"] is None:
        return _Filter(steps, None, None)
    return _Filter(steps, _OPERATORS[match["op"]], _literal(match["lit"].strip(), path))


def _literal(text: str, path: str) -> Any:
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    if text in ("true", "false"):
        return text == "true"
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        raise BadRequest(f"invalid literal {text!r} in JSONPath {path!r}") from None
