"""`daiku plan`: what daiku would launch for these manifests, offline.

Reads Kubernetes objects (YAML or JSON, several documents or ``kind: List``): NodePool
(``daiku.dev/v1`` or ``karpenter.sh/v1``), EC2NodeClass (ignored for solving), Pod,
Deployment / ReplicaSet / StatefulSet / Job (expanded to their replicas), DaemonSet and Node
(pods with ``spec.nodeName`` run on it). Solves with ``scheduler_svc.core`` against an
instance-type catalog (``--catalog`` JSON as ``daiku catalog -o json`` prints it, else the
bundled us-east-1 catalog) and prints the plan.

Exit status: 0 with a plan (even when some pods are unschedulable; they are listed with their
reason), 2 on bad input: the message names the file, object and field, and no plan is printed.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml

from actuator_svc.core.allocatable import NodeResources, allocatable_from_capacity
from daiku_cli.main import app
from scheduler_svc.core import (
    HostPort,
    InitContainer,
    InstanceType,
    LabelSelector,
    Node,
    NodePool,
    NodePoolLimits,
    Offering,
    Operator,
    Pod,
    PodAffinityTerm,
    PreferredNodeAffinityTerm,
    QuantityError,
    Requirement,
    RequirementError,
    Resources,
    SchedulingInput,
    SchedulingResult,
    Taint,
    TaintEffect,
    Toleration,
    TopologySpreadConstraint,
    WeightedPodAffinityTerm,
    WhenUnsatisfiable,
    explain_pod,
    solve,
)
from scheduler_svc.core.quantity import resource_units

NODEPOOL_API_VERSIONS = {"daiku.dev/v1", "karpenter.sh/v1"}
WORKLOAD_KINDS = {"Deployment", "ReplicaSet", "StatefulSet", "Job"}
DEFAULT_NODE_PODS = 110
KNOWN_KINDS = (
    "NodePool, EC2NodeClass, Pod, Deployment, ReplicaSet, StatefulSet, Job, DaemonSet, Node, "
    "PersistentVolumeClaim, PersistentVolume"
)
KNOWN_KINDS = (
    "NodePool, EC2NodeClass, Pod, Deployment, ReplicaSet, StatefulSet, Job, DaemonSet, Node, "
    "PersistentVolumeClaim, PersistentVolume"
)


class PlanInputError(ValueError):
    """Input that cannot be planned; the message names file, object and field."""


class OutputFormat(StrEnum):
    """How the plan is printed."""

    table = "table"
    json = "json"
    yaml = "yaml"


# ---------------------------------------------------------------------------------------------
# Reading manifests


@dataclass
class _Where:
    """Where a value came from, for error messages."""

    source: str
    obj: str

    def error(self, path: str, problem: str) -> PlanInputError:
        return PlanInputError(f"{self.source}: {self.obj}: field {path}: {problem}")


@dataclass
class Manifests:
    """Everything read from the input files, converted to the solver's model."""

    pods: list[Pod] = field(default_factory=list)
    bound: dict[str, list[Pod]] = field(default_factory=dict)
    nodes: list[tuple[str, dict[str, Any], _Where]] = field(default_factory=list)
    nodepools: list[NodePool] = field(default_factory=list)
    daemonsets: list[Pod] = field(default_factory=list)
    # Volumes: pod key -> PVC names; PVC "ns/name" -> bound PV name; PV name -> zones.
    pod_claims: dict[str, list[str]] = field(default_factory=dict)
    claim_volumes: dict[str, str] = field(default_factory=dict)
    volume_zones: dict[str, tuple[str, ...]] = field(default_factory=dict)


def _mapping(value: Any, where: _Where, path: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise where.error(path, f"expected a mapping, got {type(value).__name__}")
    return value


def _list(value: Any, where: _Where, path: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise where.error(path, f"expected a list, got {type(value).__name__}")
    return value


def _str_map(value: Any, where: _Where, path: str) -> dict[str, str]:
    return {str(k): str(v) for k, v in _mapping(value, where, path).items()}


def _int(value: Any, where: _Where, path: str, default: int) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise where.error(path, f"expected an integer, got {value!r}")
    return value


def _quantities(value: Any, where: _Where, path: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for name, amount in _mapping(value, where, path).items():
        try:
            out[str(name)] = resource_units(str(name), amount)
        except QuantityError as exc:
            raise where.error(f"{path}.{name}", str(exc)) from None
    return out


def _resources(value: Any, where: _Where, path: str) -> Resources:
    return Resources.from_mapping(_quantities(value, where, path))


def _requirements(value: Any, where: _Where, path: str) -> tuple[Requirement, ...]:
    out: list[Requirement] = []
    for i, raw_item in enumerate(_list(value, where, path)):
        item_path = f"{path}[{i}]"
        item = _mapping(raw_item, where, item_path)
        try:
            operator = Operator(str(item.get("operator")))
        except ValueError:
            raise where.error(
                f"{item_path}.operator", f"unknown operator {item.get('operator')!r}"
            ) from None
        values = tuple(str(v) for v in _list(item.get("values"), where, f"{item_path}.values"))
        min_values = item.get("minValues")
        try:
            out.append(
                Requirement(
                    str(item.get("key", "")),
                    operator,
                    values,
                    _int(min_values, where, f"{item_path}.minValues", 0) or None,
                )
            )
        except RequirementError as exc:
            raise where.error(item_path, str(exc)) from None
    return tuple(out)


def _selector(value: Any, where: _Where, path: str) -> LabelSelector:
    selector = _mapping(value, where, path)
    return LabelSelector.of(
        _str_map(selector.get("matchLabels"), where, f"{path}.matchLabels"),
        _requirements(selector.get("matchExpressions"), where, f"{path}.matchExpressions"),
    )


def _taints(value: Any, where: _Where, path: str) -> tuple[Taint, ...]:
    out = []
    for i, raw_item in enumerate(_list(value, where, path)):
        item = _mapping(raw_item, where, f"{path}[{i}]")
        try:
            effect = TaintEffect(str(item.get("effect")))
        except ValueError:
            raise where.error(
                f"{path}[{i}].effect", f"unknown taint effect {item.get('effect')!r}"
            ) from None
        out.append(Taint(str(item.get("key", "")), effect, str(item.get("value") or "")))
    return tuple(out)


def _tolerations(value: Any, where: _Where, path: str) -> tuple[Toleration, ...]:
    out = []
    for i, raw_item in enumerate(_list(value, where, path)):
        item = _mapping(raw_item, where, f"{path}[{i}]")
        effect_text = item.get("effect")
        try:
            effect = TaintEffect(effect_text) if effect_text else None
        except ValueError:
            raise where.error(f"{path}[{i}].effect", f"unknown effect {effect_text!r}") from None
        operator = str(item.get("operator") or "Equal")
        if operator not in ("Equal", "Exists"):
            raise where.error(f"{path}[{i}].operator", f"unknown operator {operator!r}")
        out.append(
            Toleration(str(item.get("key") or ""), operator, str(item.get("value") or ""), effect)
        )
    return tuple(out)


def _affinity_terms(value: Any, where: _Where, path: str) -> tuple[PodAffinityTerm, ...]:
    out = []
    for i, raw_item in enumerate(_list(value, where, path)):
        item_path = f"{path}[{i}]"
        item = _mapping(raw_item, where, item_path)
        key = item.get("topologyKey")
        if not key:
            raise where.error(f"{item_path}.topologyKey", "required")
        namespaces = tuple(str(n) for n in _list(item.get("namespaces"), where, item_path))
        out.append(
            PodAffinityTerm(
                str(key), _selector(item.get("labelSelector"), where, item_path), namespaces
            )
        )
    return tuple(out)


def _weighted_terms(value: Any, where: _Where, path: str) -> tuple[WeightedPodAffinityTerm, ...]:
    out = []
    for i, raw_item in enumerate(_list(value, where, path)):
        item = _mapping(raw_item, where, f"{path}[{i}]")
        (term,) = _affinity_terms([item.get("podAffinityTerm")], where, f"{path}[{i}]")
        out.append(WeightedPodAffinityTerm(_int(item.get("weight"), where, path, 1), term))
    return tuple(out)


def _spreads(value: Any, where: _Where, path: str) -> tuple[TopologySpreadConstraint, ...]:
    out = []
    for i, raw_item in enumerate(_list(value, where, path)):
        p = f"{path}[{i}]"
        item = _mapping(raw_item, where, p)
        if not item.get("topologyKey"):
            raise where.error(f"{p}.topologyKey", "required")
        try:
            when = WhenUnsatisfiable(item.get("whenUnsatisfiable") or "DoNotSchedule")
        except ValueError:
            raise where.error(
                f"{p}.whenUnsatisfiable", "must be DoNotSchedule or ScheduleAnyway"
            ) from None
        selector = item.get("labelSelector")
        out.append(
            TopologySpreadConstraint(
                str(item["topologyKey"]),
                _int(item.get("maxSkew"), where, f"{p}.maxSkew", 1),
                when,
                _selector(selector, where, f"{p}.labelSelector") if selector is not None else None,
                item.get("minDomains")
                and _int(item.get("minDomains"), where, f"{p}.minDomains", 1),
                (item.get("nodeAffinityPolicy") or "Honor") == "Honor",
                (item.get("nodeTaintsPolicy") or "Ignore") == "Honor",
                tuple(str(k) for k in _list(item.get("matchLabelKeys"), where, p)),
            )
        )
    return tuple(out)


def _container_requests(container: dict[str, Any], where: _Where, path: str) -> Resources:
    resources = _mapping(container.get("resources"), where, f"{path}.resources")
    # Kubernetes defaults a request to its limit when only the limit is given.
    limits = _quantities(resources.get("limits"), where, f"{path}.resources.limits")
    requests = _quantities(resources.get("requests"), where, f"{path}.resources.requests")
    return Resources.from_mapping({**limits, **requests})


def pod_from_spec(
    name: str, namespace: str, labels: dict[str, str], spec: Any, *, where: _Where, path: str
) -> Pod:
    """A Pod from a pod spec (a Pod's ``spec`` or a workload's ``spec.template.spec``)."""
    spec = _mapping(spec, where, path)
    containers = []
    ports: list[HostPort] = []
    for i, raw_container in enumerate(_list(spec.get("containers"), where, f"{path}.containers")):
        cpath = f"{path}.containers[{i}]"
        container = _mapping(raw_container, where, cpath)
        containers.append(_container_requests(container, where, cpath))
        for j, raw_port in enumerate(_list(container.get("ports"), where, f"{cpath}.ports")):
            port = _mapping(raw_port, where, f"{cpath}.ports[{j}]")
            if port.get("hostPort"):
                ports.append(
                    HostPort(
                        _int(port["hostPort"], where, f"{cpath}.ports[{j}].hostPort", 0),
                        str(port.get("protocol") or "TCP"),
                        str(port.get("hostIP") or "0.0.0.0"),  # noqa: S104 - k8s default
                    )
                )
    inits = []
    for i, raw_container in enumerate(
        _list(spec.get("initContainers"), where, f"{path}.initContainers")
    ):
        cpath = f"{path}.initContainers[{i}]"
        container = _mapping(raw_container, where, cpath)
        inits.append(
            InitContainer(
                _container_requests(container, where, cpath),
                container.get("restartPolicy") == "Always",
            )
        )
    affinity = _mapping(spec.get("affinity"), where, f"{path}.affinity")
    node_affinity = _mapping(affinity.get("nodeAffinity"), where, f"{path}.affinity.nodeAffinity")
    napath = f"{path}.affinity.nodeAffinity"
    required = _mapping(
        node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution"), where, napath
    )
    terms = tuple(
        _requirements(
            _mapping(t, where, f"{napath}.nodeSelectorTerms[{i}]").get("matchExpressions"),
            where,
            f"{napath}.nodeSelectorTerms[{i}].matchExpressions",
        )
        for i, t in enumerate(_list(required.get("nodeSelectorTerms"), where, napath))
    )
    preferred = tuple(
        PreferredNodeAffinityTerm(
            _int(_mapping(t, where, napath).get("weight"), where, napath, 1),
            _requirements(
                _mapping(_mapping(t, where, napath).get("preference"), where, napath).get(
                    "matchExpressions"
                ),
                where,
                f"{napath}.preferredDuringSchedulingIgnoredDuringExecution[{i}]",
            ),
        )
        for i, t in enumerate(
            _list(
                node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution"), where, napath
            )
        )
    )
    pa = _mapping(affinity.get("podAffinity"), where, f"{path}.affinity.podAffinity")
    paa = _mapping(affinity.get("podAntiAffinity"), where, f"{path}.affinity.podAntiAffinity")
    req_key = "requiredDuringSchedulingIgnoredDuringExecution"
    pref_key = "preferredDuringSchedulingIgnoredDuringExecution"
    return Pod(
        name=name,
        namespace=namespace,
        labels=labels,
        containers=tuple(containers),
        init_containers=tuple(inits),
        overhead=_resources(spec.get("overhead"), where, f"{path}.overhead"),
        node_selector=_str_map(spec.get("nodeSelector"), where, f"{path}.nodeSelector"),
        required_node_affinity=terms,
        preferred_node_affinity=preferred,
        tolerations=_tolerations(spec.get("tolerations"), where, f"{path}.tolerations"),
        topology_spread=_spreads(
            spec.get("topologySpreadConstraints"), where, f"{path}.topologySpreadConstraints"
        ),
        pod_affinity=_affinity_terms(pa.get(req_key), where, f"{path}.affinity.podAffinity"),
        pod_anti_affinity=_affinity_terms(
            paa.get(req_key), where, f"{path}.affinity.podAntiAffinity"
        ),
        preferred_pod_affinity=_weighted_terms(
            pa.get(pref_key), where, f"{path}.affinity.podAffinity"
        ),
        preferred_pod_anti_affinity=_weighted_terms(
            paa.get(pref_key), where, f"{path}.affinity.podAntiAffinity"
        ),
        host_ports=tuple(ports),
    )


def _nodepool(obj: dict[str, Any], where: _Where) -> NodePool:
    spec = _mapping(obj.get("spec"), where, "spec")
    template = _mapping(spec.get("template"), where, "spec.template")
    tspec = _mapping(template.get("spec"), where=where, path="spec.template.spec")
    metadata = _mapping(template.get("metadata"), where, "spec.template.metadata")
    limits = _quantities(
        _mapping(spec.get("limits"), where, "spec.limits"),
        where,
        "spec.limits",
    )
    requirements = _requirements(
        tspec.get("requirements"), where, "spec.template.spec.requirements"
    )
    for i, requirement in enumerate(requirements):
        if requirement.key in RESTRICTED_NODEPOOL_KEYS:
            raise where.error(
                f"spec.template.spec.requirements[{i}].key",
                f"{requirement.key} is restricted: daiku sets it on each node itself",
            )
    return NodePool(
        name=str(obj["metadata"]["name"]),
        requirements=requirements,
        labels=_str_map(metadata.get("labels"), where, "spec.template.metadata.labels"),
        taints=_taints(tspec.get("taints"), where, "spec.template.spec.taints"),
        startup_taints=_taints(
            tspec.get("startupTaints"), where, "spec.template.spec.startupTaints"
        ),
        weight=_int(spec.get("weight"), where, "spec.weight", 0),
        limits=NodePoolLimits(limits.get("cpu"), limits.get("memory"), limits.get("nodes")),
    )


def _documents(path: str) -> Iterator[tuple[dict[str, Any], str]]:
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise PlanInputError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        documents = list(yaml.safe_load_all(text))
    except yaml.YAMLError as exc:
        raise PlanInputError(f"{path}: malformed YAML/JSON: {exc}".replace("\n", " ")) from None
    for index, document in enumerate(documents):
        if document is None:
            continue
        if not isinstance(document, dict):
            raise PlanInputError(f"{path}: document {index + 1}: expected an object")
        if document.get("kind") == "List":
            for i, item in enumerate(document.get("items") or []):
                if not isinstance(item, dict):
                    raise PlanInputError(f"{path}: List item {i}: expected an object")
                yield item, path
        else:
            yield document, path


def read_manifests(paths: list[str]) -> Manifests:  # noqa: PLR0912 - one branch per kind
    """Every object of every file, converted; raises PlanInputError naming the culprit."""
    out = Manifests()
    for obj, source in (d for p in paths for d in _documents(p)):
        kind = obj.get("kind")
        raw_metadata = obj.get("metadata")
        metadata: dict[str, Any] = raw_metadata if isinstance(raw_metadata, dict) else {}
        name = metadata.get("name")
        namespace = str(metadata.get("namespace") or "default")
        where = _Where(
            source, f"{kind} {namespace}/{name}" if kind != "NodePool" else f"NodePool {name}"
        )
        if not kind:
            raise PlanInputError(f"{source}: object {name!r}: field kind: required")
        if not name:
            raise where.error("metadata.name", "required")
        labels = _str_map(metadata.get("labels"), where, "metadata.labels")
        if kind == "NodePool":
            if obj.get("apiVersion") not in NODEPOOL_API_VERSIONS:
                raise where.error(
                    "apiVersion",
                    f"{obj.get('apiVersion')!r} is not one of {sorted(NODEPOOL_API_VERSIONS)}",
                )
            out.nodepools.append(_nodepool(obj, where))
        elif kind == "EC2NodeClass":
            continue  # launch settings only: nothing in it changes the plan
        elif kind == "Pod":
            spec = _mapping(obj.get("spec"), where, "spec")
            pod = pod_from_spec(str(name), namespace, labels, spec, where=where, path="spec")
            out.pod_claims[pod.key] = _claim_names(spec, where, "spec")
            node_name = spec.get("nodeName")
            if node_name:
                out.bound.setdefault(str(node_name), []).append(pod)
            else:
                out.pods.append(pod)
        elif kind in WORKLOAD_KINDS or kind == "DaemonSet":
            _read_workload(
                out, obj, kind=str(kind), name=str(name), namespace=namespace, where=where
            )
        elif kind == "Node":
            out.nodes.append((str(name), obj, where))
        elif kind == "PersistentVolumeClaim":
            spec = _mapping(obj.get("spec"), where, "spec")
            if spec.get("volumeName"):
                out.claim_volumes[f"{namespace}/{name}"] = str(spec["volumeName"])
        elif kind == "PersistentVolume":
            out.volume_zones[str(name)] = _volume_zones(obj, where)
        else:
            raise where.error(
                "kind",
                f"unknown kind {kind!r} (expected one of {KNOWN_KINDS})",
            )
    return out


def _read_workload(
    out: Manifests, obj: dict[str, Any], *, kind: str, name: str, namespace: str, where: _Where
) -> None:
    """A DaemonSet (a template for every new node) or a workload expanded to its replicas."""
    spec = _mapping(obj.get("spec"), where, "spec")
    template = _mapping(spec.get("template"), where, "spec.template")
    tmeta = _mapping(template.get("metadata"), where, "spec.template.metadata")
    tlabels = _str_map(tmeta.get("labels"), where, "spec.template.metadata.labels")
    tspec = template.get("spec")
    if kind == "DaemonSet":
        out.daemonsets.append(
            pod_from_spec(name, namespace, tlabels, tspec, where=where, path="spec.template.spec")
        )
        return
    count_field = "parallelism" if kind == "Job" else "replicas"
    replicas = _int(spec.get(count_field), where, f"spec.{count_field}", 1)
    if replicas < 0:
        raise where.error(f"spec.{count_field}", "must not be negative")
    template_pod = pod_from_spec(
        f"{name}-0", namespace, tlabels, tspec, where=where, path="spec.template.spec"
    )
    replica_pods = _replicas(template_pod, name, replicas)
    claims = _claim_names(tspec, where, "spec.template.spec")
    templates = [
        str(_mapping(t, where, "spec.volumeClaimTemplates").get("metadata", {}).get("name"))
        for t in _list(spec.get("volumeClaimTemplates"), where, "spec.volumeClaimTemplates")
    ]
    for ordinal, replica in enumerate(replica_pods):
        # StatefulSet replicas own PVCs named <template>-<statefulset>-<ordinal>.
        stateful = [f"{t}-{name}-{ordinal}" for t in templates] if kind == "StatefulSet" else []
        out.pod_claims[replica.key] = claims + stateful
    out.pods.extend(replica_pods)


ZONE_KEYS = (
    "topology.kubernetes.io/zone",
    "topology.ebs.csi.aws.com/zone",
    "failure-domain.beta.kubernetes.io/zone",
)
RESTRICTED_NODEPOOL_KEYS = ("kubernetes.io/hostname", "daiku.dev/nodepool", "karpenter.sh/nodepool")


def _claim_names(spec: Any, where: _Where, path: str) -> list[str]:
    names = []
    volumes = _list(_mapping(spec, where, path).get("volumes"), where, f"{path}.volumes")
    for i, volume in enumerate(volumes):
        claim = _mapping(volume, where, f"{path}.volumes[{i}]").get("persistentVolumeClaim")
        if claim:
            names.append(str(_mapping(claim, where, f"{path}.volumes[{i}]").get("claimName")))
    return names


def _volume_zones(obj: dict[str, Any], where: _Where) -> tuple[str, ...]:
    """Zones a PersistentVolume's node affinity allows (empty: any)."""
    spec = _mapping(obj.get("spec"), where, "spec")
    path = "spec.nodeAffinity.required"
    required = _mapping(
        _mapping(spec.get("nodeAffinity"), where, "spec.nodeAffinity").get("required"), where, path
    )
    zones: list[str] = []
    for i, term in enumerate(_list(required.get("nodeSelectorTerms"), where, path)):
        expressions = _mapping(term, where, f"{path}.nodeSelectorTerms[{i}]").get(
            "matchExpressions"
        )
        for requirement in _requirements(expressions, where, f"{path}.nodeSelectorTerms[{i}]"):
            if requirement.key in ZONE_KEYS and requirement.operator is Operator.IN:
                zones.extend(requirement.values)
    return tuple(sorted(set(zones)))


def _with_volume_zones(manifests: Manifests) -> list[Pod]:
    """Pending pods with the zones their bound volumes allow."""
    from dataclasses import replace

    out = []
    for pod in manifests.pods:
        allowed: set[str] | None = None
        for claim in manifests.pod_claims.get(pod.key, []):
            volume = manifests.claim_volumes.get(f"{pod.namespace}/{claim}")
            zones = manifests.volume_zones.get(volume or "", ())
            if zones:
                allowed = set(zones) if allowed is None else allowed & set(zones)
        if allowed is None:
            out.append(pod)
            continue
        if not allowed:
            raise PlanInputError(
                f"Pod {pod.key}: field spec.volumes: its volumes are bound in disjoint zones"
            )
        out.append(replace(pod, volume_zones=tuple(sorted(allowed))))
    return out


def _replicas(template: Pod, name: str, count: int) -> list[Pod]:
    from dataclasses import replace

    return [replace(template, name=f"{name}-{i}") for i in range(count)]


def _nodes(manifests: Manifests) -> list[Node]:
    nodes = []
    known = set()
    for name, obj, where in manifests.nodes:
        known.add(name)
        metadata = _mapping(obj.get("metadata"), where, "metadata")
        spec = _mapping(obj.get("spec"), where, "spec")
        status = _mapping(obj.get("status"), where, "status")
        allocatable = _quantities(status.get("allocatable"), where, "status.allocatable")
        capacity = _quantities(status.get("capacity"), where, "status.capacity")
        allocatable.setdefault("pods", capacity.get("pods", DEFAULT_NODE_PODS))
        for key, amount in capacity.items():
            allocatable.setdefault(key, amount)
        nodes.append(
            Node(
                name,
                _str_map(metadata.get("labels"), where, "metadata.labels"),
                _taints(spec.get("taints"), where, "spec.taints"),
                Resources.from_mapping(allocatable),
                Resources.from_mapping(capacity) if capacity else None,
                tuple(manifests.bound.get(name, ())),
            )
        )
    for node_name, pods in manifests.bound.items():
        if node_name not in known:
            raise PlanInputError(
                f"Pod {pods[0].key}: field spec.nodeName: no Node {node_name!r} in the input"
            )
    return nodes


# ---------------------------------------------------------------------------------------------
# The catalog


def instance_types_from_document(document: Any, source: str) -> list[InstanceType]:
    """Instance types from ``{"instanceTypes": [...]}``; allocatable computed per FACTS §1 from
    capacity when the document leaves it out."""
    if not isinstance(document, dict) or not isinstance(document.get("instanceTypes"), list):
        raise PlanInputError(f"{source}: field instanceTypes: expected a list")
    out = []
    for i, item in enumerate(document["instanceTypes"]):
        if not isinstance(item, dict) or not item.get("name"):
            raise PlanInputError(f"{source}: instanceTypes[{i}]: field name: required")
        where = _Where(source, f"instance type {item['name']}")
        capacity = _quantities(item.get("capacity"), where, "capacity")
        if "allocatable" in item:
            allocatable = _resources(item.get("allocatable"), where, "allocatable")
        else:
            base = {"cpu", "memory", "pods", "ephemeral-storage"}
            computed = allocatable_from_capacity(
                NodeResources(
                    cpu_millis=capacity.get("cpu", 0),
                    memory_bytes=capacity.get("memory", 0),
                    pods=capacity.get("pods", 0),
                    ephemeral_storage_bytes=capacity.get("ephemeral-storage", 20 * 1024**3),
                    extended={k: v for k, v in capacity.items() if k not in base},
                )
            )
            allocatable = Resources(
                computed.cpu_millis,
                computed.memory_bytes,
                computed.pods,
                computed.ephemeral_storage_bytes,
                tuple(sorted(computed.extended.items())),
            )
        offerings = []
        for j, raw_offering in enumerate(_list(item.get("offerings"), where, "offerings")):
            offering = _mapping(raw_offering, where, f"offerings[{j}]")
            try:
                offerings.append(
                    Offering(
                        str(offering["zone"]),
                        str(offering["capacityType"]),
                        float(offering["price"]),
                        bool(offering.get("available", True)),
                    )
                )
            except (KeyError, TypeError, ValueError) as exc:
                raise where.error(
                    f"offerings[{j}]", f"needs zone, capacityType, price ({exc})"
                ) from None
        out.append(
            InstanceType(
                str(item["name"]),
                Resources.from_mapping(capacity),
                allocatable,
                _str_map(item.get("labels"), where, "labels"),
                tuple(offerings),
            )
        )
    return out


def load_catalog(path: str | None) -> list[InstanceType]:
    """The catalog file, or the bundled catalog."""
    if path is None:
        from daiku_cli.catalog import bundled_catalog_document

        return instance_types_from_document(bundled_catalog_document(), "bundled catalog")
    try:
        document = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise PlanInputError(f"{path}: cannot read: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise PlanInputError(f"{path}: malformed JSON: {exc}") from None
    return instance_types_from_document(document, path)


# ---------------------------------------------------------------------------------------------
# Output


def plan_document(result: SchedulingResult, solve_seconds: float) -> dict[str, Any]:
    """The plan in the JSON/YAML shape (camelCase keys, as Kubernetes does)."""
    return {
        "nodeClaims": [
            {
                "nodePool": claim.nodepool,
                "instanceType": claim.instance_type,
                "zone": claim.offerings[0].zone,
                "capacityType": claim.offerings[0].capacity_type,
                "price": claim.price_per_hour,
                "offeringCount": len(claim.offerings),
                "pods": list(claim.pods),
            }
            for claim in result.new_claims
        ],
        "existingNodePlacements": [
            {"node": p.node, "pods": list(p.pods)} for p in result.existing_placements
        ],
        "unschedulable": [{"pod": u.pod, "reason": u.reason} for u in result.unschedulable],
        "totalHourlyCost": round(result.total_price_per_hour, 6),
        "solveSeconds": round(solve_seconds, 6),
    }


def _table(document: dict[str, Any]) -> str:
    lines = []
    claims = document["nodeClaims"]
    lines.append(f"New NodeClaims: {len(claims)}")
    if claims:
        header = (
            "NODEPOOL",
            "INSTANCE-TYPE",
            "ZONE",
            "CAPACITY-TYPE",
            "PRICE/H",
            "FALLBACKS",
            "PODS",
        )
        rows = [
            (
                c["nodePool"],
                c["instanceType"],
                c["zone"],
                c["capacityType"],
                f"{c['price']:.4f}",
                str(c["offeringCount"] - 1),
                str(len(c["pods"])),
            )
            for c in claims
        ]
        widths = [max(len(r[i]) for r in (header, *rows)) for i in range(len(header))]
        lines.extend(
            "  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip()
            for row in (header, *rows)
        )
    placements = document["existingNodePlacements"]
    if placements:
        lines.append(f"Pods placed on existing nodes: {sum(len(p['pods']) for p in placements)}")
        lines += [f"  {p['node']}: {', '.join(p['pods'])}" for p in placements]
    unschedulable = document["unschedulable"]
    lines.append(f"Unschedulable pods: {len(unschedulable)}")
    lines += [f"  {u['pod']}: {u['reason']}" for u in unschedulable]
    lines.append(f"Total hourly cost: ${document['totalHourlyCost']:.4f}")
    lines.append(f"Solve time: {document['solveSeconds']:.3f}s")
    return "\n".join(lines)


_RENDER: dict[OutputFormat, Callable[[dict[str, Any]], str]] = {
    OutputFormat.table: _table,
    OutputFormat.json: lambda d: json.dumps(d, indent=2),
    OutputFormat.yaml: lambda d: yaml.safe_dump(d, sort_keys=False).rstrip(),
}


def build_input(files: list[str], catalog: str | None) -> SchedulingInput:
    """Read manifests and catalog into one solver input (raises PlanInputError)."""
    manifests = read_manifests(files)
    nodes = _nodes(manifests)
    return SchedulingInput(
        pods=tuple(_with_volume_zones(manifests)),
        nodepools=tuple(manifests.nodepools),
        instance_types=tuple(load_catalog(catalog)),
        nodes=tuple(nodes),
        daemonsets=tuple(manifests.daemonsets),
    )


def _explain(problem: SchedulingInput, result: SchedulingResult, pod: str) -> str:
    key = pod if "/" in pod else f"default/{pod}"
    explanation = explain_pod(problem, key)
    outcome = next(
        (
            f"placed on new NodeClaim {i + 1} ({c.instance_type}, NodePool {c.nodepool})"
            for i, c in enumerate(result.new_claims)
            if key in c.pods
        ),
        None,
    )
    outcome = outcome or next(
        (f"placed on existing node {p.node}" for p in result.existing_placements if key in p.pods),
        None,
    )
    outcome = outcome or next(
        (f"unschedulable: {u.reason}" for u in result.unschedulable if u.pod == key), "not planned"
    )
    lines = [
        f"Pod {key}: {outcome}",
        f"NodePools ruled out: {explanation.nodepools_ruled_out} of {explanation.nodepools_total}",
        *explanation.lines,
    ]
    return "\n".join(lines)


def _check_explained(problem: SchedulingInput, pod: str) -> None:
    key = pod if "/" in pod else f"default/{pod}"
    if all(p.key != key for p in problem.pods):
        raise PlanInputError(f"--explain {pod}: no pending pod {key} in the input")


@app.command(name="plan")
def plan(
    filenames: Annotated[
        list[str],
        typer.Option("--filename", "-f", help="Manifests (YAML or JSON; repeatable; - for stdin)."),
    ],
    catalog: Annotated[
        str | None,
        typer.Option("--catalog", help="Instance-type catalog JSON (default: bundled us-east-1)."),
    ] = None,
    output: Annotated[
        OutputFormat, typer.Option("--output", "-o", help="Output format.")
    ] = OutputFormat.table,
    explain: Annotated[
        str | None, typer.Option("--explain", help="Explain one pod (namespace/name or name).")
    ] = None,
) -> None:
    """Show which NodeClaims daiku would launch for these manifests, and why."""
    try:
        problem = build_input(filenames, catalog)
        if explain is not None:
            _check_explained(problem, explain)
    except PlanInputError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    started = time.perf_counter()
    result = solve(problem)
    solve_seconds = time.perf_counter() - started
    if explain is not None:
        typer.echo(_explain(problem, result, explain))
        return
    typer.echo(_RENDER[output](plan_document(result, solve_seconds)))
