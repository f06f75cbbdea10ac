"""Scenarios for `daiku up`: Kubernetes objects to apply, then steps to run in order.

A scenario file is multi-document YAML. Every document that is not the `Scenario` is a
Kubernetes object (or a `kind: List` of them), applied before the first step and replacing the
default object of the same kind, namespace and name. At most one document is

    apiVersion: daiku.dev/v1alpha1
    kind: Scenario
    spec:
      steps:
        - scale: {deployment: default/inflate, replicas: 5}
        - waitUntilSettled: {timeoutSeconds: 120}
        - apply: {apiVersion: v1, kind: ConfigMap, metadata: {name: x}}
        - delete: {kind: Deployment, name: default/inflate}
        - sleep: {seconds: 2}

A file without a Scenario document gets one step: `waitUntilSettled` with the default timeout.
Parsing is pure (no I/O besides what the caller reads); a bad document raises ScenarioError
naming the source, the document, the step and the field.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import yaml

SCENARIO_API_VERSION = "daiku.dev/v1alpha1"
SCENARIO_KIND = "Scenario"
DEFAULT_NAMESPACE = "default"
DEFAULT_SETTLE_TIMEOUT_SECONDS = 120.0

KubeObject = dict[str, Any]


class ScenarioError(ValueError):
    """A scenario that cannot run; the message names the source, document, step and field."""


@dataclass(frozen=True)
class ObjectRef:
    """A namespaced (or cluster-scoped, namespace None) object name."""

    namespace: str | None
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


@dataclass(frozen=True)
class ScaleStep:
    """Set a Deployment's replicas."""

    deployment: ObjectRef
    replicas: int

    def describe(self) -> str:
        return f"scale deployment {self.deployment} to {self.replicas}"


@dataclass(frozen=True)
class ApplyStep:
    """Create the object, or replace it when it exists."""

    obj: KubeObject

    def describe(self) -> str:
        return f"apply {object_identity(self.obj)}"


@dataclass(frozen=True)
class DeleteStep:
    """Delete an object by kind and name (namespace `default` unless given as NS/NAME)."""

    kind: str
    name: str
    namespace: str | None
    api_version: str | None = None

    def describe(self) -> str:
        ref = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"delete {self.kind} {ref}"


@dataclass(frozen=True)
class WaitUntilSettledStep:
    """Wait until nothing is in motion: no pod pending, no NodeClaim launching or terminating."""

    timeout_seconds: float = DEFAULT_SETTLE_TIMEOUT_SECONDS

    def describe(self) -> str:
        return f"wait until settled (timeout {self.timeout_seconds:g} s)"


@dataclass(frozen=True)
class SleepStep:
    """Do nothing for a while (the cluster keeps moving)."""

    seconds: float

    def describe(self) -> str:
        return f"sleep {self.seconds:g} s"


Step = ScaleStep | ApplyStep | DeleteStep | WaitUntilSettledStep | SleepStep
STEP_KINDS = ("scale", "apply", "delete", "waitUntilSettled", "sleep")


@dataclass(frozen=True)
class Scenario:
    """Objects applied first (in file order), then steps run in order."""

    objects: tuple[KubeObject, ...]
    steps: tuple[Step, ...]
    name: str = "scenario"


def object_identity(obj: Mapping[str, Any]) -> str:
    """`Kind namespace/name` (or `Kind name`) of an object, for messages."""
    metadata = obj.get("metadata") or {}
    namespace = metadata.get("namespace")
    name = metadata.get("name", "?")
    return f"{obj.get('kind', '?')} {namespace + '/' if namespace else ''}{name}"


def object_key(obj: Mapping[str, Any]) -> tuple[str, str, str]:
    """(kind, namespace or "", name): what makes a scenario object replace a default one."""
    metadata = obj.get("metadata") or {}
    return (str(obj.get("kind")), str(metadata.get("namespace") or ""), str(metadata.get("name")))


def merge_objects(
    defaults: Iterable[KubeObject], overrides: Iterable[KubeObject]
) -> tuple[KubeObject, ...]:
    """The defaults with each one replaced by the override of the same kind and name (in the
    default's place), then the overrides that replace nothing, in their order.

    A namespaced default (e.g. Deployment default/inflate) is replaced by an override without a
    namespace too, since that one lands in `default` as well.
    """

    def key(obj: KubeObject) -> tuple[str, str, str]:
        kind, namespace, name = object_key(obj)
        return kind, namespace or DEFAULT_NAMESPACE, name

    by_key = {key(obj): obj for obj in overrides}
    merged: list[KubeObject] = []
    used: set[tuple[str, str, str]] = set()
    for obj in defaults:
        replacement = by_key.get(key(obj))
        if replacement is not None:
            used.add(key(obj))
        merged.append(replacement if replacement is not None else obj)
    merged.extend(obj for obj in overrides if key(obj) not in used)
    return tuple(merged)


# -- parsing ---------------------------------------------------------------------------------


def parse_scenario(text: str, source: str = "scenario") -> Scenario:
    """Parse a scenario file's text; ScenarioError names what is wrong and where."""
    try:
        documents = list(yaml.safe_load_all(text))
    except yaml.YAMLError as error:
        raise ScenarioError(f"{source}: not valid YAML: {error}") from error
    objects: list[KubeObject] = []
    steps: tuple[Step, ...] | None = None
    for number, document in enumerate(documents, start=1):
        where = f"{source}: document {number}"
        if document is None:
            continue
        if not isinstance(document, dict):
            raise ScenarioError(f"{where}: expected a mapping, got {_kind_of(document)}")
        if document.get("kind") == SCENARIO_KIND:
            if steps is not None:
                raise ScenarioError(f"{where}: a second Scenario document (only one is allowed)")
            steps = _parse_scenario_document(document, f"{where} (Scenario)")
            continue
        if document.get("kind") == "List" and isinstance(document.get("items"), list):
            for index, item in enumerate(document["items"]):
                objects.append(_check_object(item, f"{where}, items[{index}]"))
            continue
        objects.append(_check_object(document, where))
    if steps is None:
        steps = (WaitUntilSettledStep(),)
    return Scenario(objects=tuple(objects), steps=steps, name=source)


def _parse_scenario_document(document: Mapping[str, Any], where: str) -> tuple[Step, ...]:
    if document.get("apiVersion") != SCENARIO_API_VERSION:
        raise ScenarioError(
            f"{where}: apiVersion must be {SCENARIO_API_VERSION}, "
            f"got {document.get('apiVersion')!r}"
        )
    spec = document.get("spec")
    if not isinstance(spec, dict):
        raise ScenarioError(f"{where}: spec: expected a mapping with steps")
    raw_steps = spec.get("steps")
    if not isinstance(raw_steps, list) or not raw_steps:
        raise ScenarioError(f"{where}: spec.steps: expected a non-empty list of steps")
    return tuple(
        parse_step(raw, f"{where}: spec.steps[{index}]") for index, raw in enumerate(raw_steps)
    )


def parse_step(raw: Any, where: str) -> Step:
    """One step: a mapping with exactly one of scale, apply, delete, waitUntilSettled, sleep."""
    if not isinstance(raw, dict) or len(raw) != 1:
        raise ScenarioError(
            f"{where}: expected a mapping with exactly one of {', '.join(STEP_KINDS)}"
        )
    ((kind, body),) = raw.items()
    where = f"{where}.{kind}"
    if kind == "scale":
        body = _mapping(body, where, {"deployment", "replicas"})
        return ScaleStep(
            deployment=_ref(_required(body, "deployment", where), f"{where}.deployment"),
            replicas=_non_negative_int(_required(body, "replicas", where), f"{where}.replicas"),
        )
    if kind == "apply":
        return ApplyStep(_check_object(body, where))
    if kind == "delete":
        body = _mapping(body, where, {"kind", "name", "apiVersion"})
        kind_name = _required(body, "kind", where)
        if not isinstance(kind_name, str) or not kind_name:
            raise ScenarioError(f"{where}.kind: expected a kind such as Deployment")
        ref = _ref(_required(body, "name", where), f"{where}.name")
        api_version = body.get("apiVersion")
        if api_version is not None and not isinstance(api_version, str):
            raise ScenarioError(f"{where}.apiVersion: expected a string")
        namespace_given = "/" in str(body["name"])
        return DeleteStep(
            kind=kind_name,
            name=ref.name,
            namespace=ref.namespace if namespace_given else None,
            api_version=api_version,
        )
    if kind == "waitUntilSettled":
        body = _mapping(body if body is not None else {}, where, {"timeoutSeconds"})
        timeout = body.get("timeoutSeconds", DEFAULT_SETTLE_TIMEOUT_SECONDS)
        return WaitUntilSettledStep(_positive_seconds(timeout, f"{where}.timeoutSeconds"))
    if kind == "sleep":
        body = _mapping(body, where, {"seconds"})
        seconds = _required(body, "seconds", where)
        if _number(seconds) is None or float(seconds) < 0:
            raise ScenarioError(f"{where}.seconds: expected a number >= 0, got {seconds!r}")
        return SleepStep(float(seconds))
    raise ScenarioError(f"{where}: unknown step {kind!r}; expected one of {', '.join(STEP_KINDS)}")


def _kind_of(value: Any) -> str:
    return type(value).__name__


def _mapping(body: Any, where: str, allowed: set[str]) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise ScenarioError(f"{where}: expected a mapping, got {_kind_of(body)}")
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise ScenarioError(
            f"{where}: unknown field {unknown[0]!r}; expected {', '.join(sorted(allowed))}"
        )
    return body


def _required(body: Mapping[str, Any], key: str, where: str) -> Any:
    if key not in body or body[key] is None:
        raise ScenarioError(f"{where}.{key}: required")
    return body[key]


def _ref(value: Any, where: str) -> ObjectRef:
    if not isinstance(value, str) or not value or value.count("/") > 1:
        raise ScenarioError(f"{where}: expected NAME or NAMESPACE/NAME, got {value!r}")
    namespace, _, name = value.rpartition("/")
    if not name or (value.startswith("/")):
        raise ScenarioError(f"{where}: expected NAME or NAMESPACE/NAME, got {value!r}")
    return ObjectRef(namespace or DEFAULT_NAMESPACE, name)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _non_negative_int(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ScenarioError(f"{where}: expected an integer >= 0, got {value!r}")
    return value


def _positive_seconds(value: Any, where: str) -> float:
    number = _number(value)
    if number is None or number <= 0:
        raise ScenarioError(f"{where}: expected a number of seconds > 0, got {value!r}")
    return number


def _check_object(obj: Any, where: str) -> KubeObject:
    if not isinstance(obj, dict):
        raise ScenarioError(f"{where}: expected a Kubernetes object (mapping)")
    for key in ("apiVersion", "kind"):
        if not isinstance(obj.get(key), str) or not obj[key]:
            raise ScenarioError(f"{where}: {key}: required (a Kubernetes object)")
    metadata = obj.get("metadata")
    if not isinstance(metadata, dict) or not isinstance(metadata.get("name"), str):
        raise ScenarioError(f"{where} ({obj['kind']}): metadata.name: required")
    return obj
