"""Kubernetes objects (raw JSON dicts) to the core's frozen dataclasses.

Each `*_from_k8s` reads only what the solver uses and raises `InvalidObjectError` naming the
object and the field path for anything it cannot use (a bad quantity, an unknown operator, a
list where a map belongs), so one bad object is reported and skipped, not a crash.

Kubernetes semantics kept here (the core sees only their result):
- a container's missing request defaults to its limit (the API server does this for pods it
  admits; objects from elsewhere, e.g. `daiku plan` manifests, may lack it);
- an init container with `restartPolicy: Always` is a sidecar;
- node affinity `matchFields` terms are ignored (they pin pods to named nodes, which a new node
  never matches; kube-scheduler handles them);
- a NodeClaim still in flight is a `Node(is_in_flight=True)` whose labels are its single-valued
  `In` requirements and whose allocatable is its status.allocatable, else its requests.

`node_class_from_k8s` and `kubelet_from_k8s` turn an EC2NodeClass into its launch settings
(`scheduler_svc.core.nodeclass`; same error reporting). Protobuf is not spoken here: the
actuator client converts those values to the contract's messages.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from functools import lru_cache
from typing import Any

from scheduler_svc.core.headroom import CapacityBuffer
from scheduler_svc.core.model import (
    HostPort,
    InitContainer,
    LabelSelector,
    Node,
    NodePool,
    NodePoolLimits,
    Pod,
    PodAffinityTerm,
    PreferredNodeAffinityTerm,
    Resources,
    TopologySpreadConstraint,
    WeightedPodAffinityTerm,
    WhenUnsatisfiable,
)
from scheduler_svc.core.nodeclass import (
    AmiTerm,
    BlockDeviceMapping,
    CapacityReservationTerm,
    KubeletSpec,
    MetadataOptions,
    NodeClassSpec,
    Pairs,
    SecurityGroupTerm,
    SubnetTerm,
    pairs,
)
from scheduler_svc.core.overlay import BASE_RESOURCES, NodeOverlay, OverlayError, PriceAdjustment
from scheduler_svc.core.quantity import QuantityError, resource_units
from scheduler_svc.core.requirements import (
    LABEL_HOSTNAME,
    LABEL_KARPENTER_NODEPOOL,
    LABEL_NODEPOOL,
    Operator,
    Requirement,
    RequirementError,
    contradiction,
)
from scheduler_svc.core.reservations import CapacityReservation
from scheduler_svc.core.taints import Taint, TaintEffect, Toleration
from scheduler_svc.errors import InvalidObjectError
from scheduler_svc.kube.resources import KubeObject

# Quantities repeat across pods of one workload ("500m", "512Mi") and across a catalog's types;
# exact parsing goes through Fractions, so memoize it: a 10,000-pod first snapshot converts
# about 2x faster, and `daiku plan` reads the bundled catalog about 3x faster.
cached_resource_units = lru_cache(maxsize=4096)(resource_units)
# kubelet's default --max-pods.
_DEFAULT_MAX_PODS = 110
# Labels daiku (like Karpenter) sets on each node itself: a NodePool may not require them.
RESTRICTED_NODEPOOL_KEYS = frozenset({LABEL_HOSTNAME, LABEL_NODEPOOL, LABEL_KARPENTER_NODEPOOL})


class _Reader:
    """Typed access to one object's fields, failing with the object's kind, name and field."""

    def __init__(self, obj: KubeObject, kind: str) -> None:
        if not isinstance(obj, dict):
            raise InvalidObjectError(kind=kind, name=None, field="", reason="not an object")
        metadata = obj.get("metadata")
        self.metadata: dict[str, Any] = metadata if isinstance(metadata, dict) else {}
        name = self.metadata.get("name")
        namespace = self.metadata.get("namespace")
        self.kind = kind
        self.name: str = name if isinstance(name, str) else ""
        self.namespace: str = namespace if isinstance(namespace, str) and namespace else ""
        if not self.name:
            raise self.error("metadata.name", "missing")

    def error(self, field: str, reason: str) -> InvalidObjectError:
        display = f"{self.namespace}/{self.name}" if self.namespace else (self.name or None)
        return InvalidObjectError(kind=self.kind, name=display, field=field, reason=reason)

    def mapping(self, value: Any, field: str) -> dict[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self.error(field, f"expected an object, got {type(value).__name__}")
        return value

    def items(self, value: Any, field: str) -> list[Any]:
        if value is None:
            return []
        if not isinstance(value, list):
            raise self.error(field, f"expected a list, got {type(value).__name__}")
        return value

    def text(self, value: Any, field: str, *, default: str | None = None) -> str:
        if value is None and default is not None:
            return default
        if not isinstance(value, str):
            raise self.error(field, f"expected a string, got {type(value).__name__}")
        return value

    def required_text(self, value: Any, field: str) -> str:
        """A string that must be present and non-empty (a key, a topologyKey)."""
        if value is None or value == "":
            raise self.error(field, "required")
        return self.text(value, field)

    def integer(self, value: Any, field: str, *, default: int | None = None) -> int:
        if value is None and default is not None:
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(field, f"expected an integer, got {value!r}")
        return value

    def strings(self, value: Any, field: str) -> dict[str, str]:
        result = self.mapping(value, field)
        for key, item in result.items():
            if not isinstance(item, str):
                raise self.error(f"{field}.{key}", f"expected a string, got {type(item).__name__}")
        return result

    def resources(self, value: Any, field: str) -> dict[str, int]:
        amounts: dict[str, int] = {}
        for resource, quantity in self.mapping(value, field).items():
            if isinstance(quantity, bool) or not isinstance(quantity, str | int | float):
                raise self.error(f"{field}.{resource}", f"{quantity!r} is not a quantity")
            try:
                amount = cached_resource_units(resource, quantity)
            except QuantityError as error:
                raise self.error(f"{field}.{resource}", str(error)) from error
            if amount < 0:
                raise self.error(f"{field}.{resource}", f"{quantity!r} is negative")
            amounts[resource] = amount
        return amounts

    def requirement(self, value: Any, field: str) -> Requirement:
        term = self.mapping(value, field)
        key = self.required_text(term.get("key"), f"{field}.key")
        operator_text = self.text(term.get("operator"), f"{field}.operator")
        try:
            operator = Operator(operator_text)
        except ValueError as error:
            known = ", ".join(o.value for o in Operator)
            raise self.error(
                f"{field}.operator", f"unknown operator {operator_text!r} (one of {known})"
            ) from error
        values = tuple(
            self.text(v, f"{field}.values[{i}]")
            for i, v in enumerate(self.items(term.get("values"), f"{field}.values"))
        )
        min_values = term.get("minValues")
        if min_values is not None:
            min_values = self.integer(min_values, f"{field}.minValues")
            if min_values < 1:
                # Karpenter's CRD: minimum 1 (0 would mean "no minimum", which is leaving it out).
                raise self.error(f"{field}.minValues", f"must be at least 1, got {min_values}")
        try:
            return Requirement(key, operator, values, min_values)
        except RequirementError as error:
            raise self.error(field, str(error)) from error

    def requirements(self, value: Any, field: str) -> tuple[Requirement, ...]:
        return tuple(
            self.requirement(term, f"{field}[{i}]")
            for i, term in enumerate(self.items(value, field))
        )

    def taint(self, value: Any, field: str) -> Taint:
        taint = self.mapping(value, field)
        return Taint(
            key=self.required_text(taint.get("key"), f"{field}.key"),
            effect=self.effect(taint.get("effect"), f"{field}.effect"),
            value=self.text(taint.get("value"), f"{field}.value", default=""),
        )

    def taints(self, value: Any, field: str) -> tuple[Taint, ...]:
        return tuple(self.taint(t, f"{field}[{i}]") for i, t in enumerate(self.items(value, field)))

    def effect(self, value: Any, field: str) -> TaintEffect:
        text = self.text(value, field)
        try:
            return TaintEffect(text)
        except ValueError as error:
            raise self.error(field, f"unknown taint effect {text!r}") from error

    def label_selector(self, value: Any, field: str) -> LabelSelector | None:
        if value is None:
            return None
        selector = self.mapping(value, field)
        return LabelSelector.of(
            self.strings(selector.get("matchLabels"), f"{field}.matchLabels"),
            self.requirements(selector.get("matchExpressions"), f"{field}.matchExpressions"),
        )


# -- pods -------------------------------------------------------------------------------------


def pod_from_k8s(obj: KubeObject, *, volume_zones: Iterable[str] = ()) -> Pod:
    """The solver's view of a Pod. `volume_zones`: zones its bound volumes allow (the caller
    resolves PVC -> PV)."""
    reader = _Reader(obj, "Pod")
    return _pod_from_spec(
        reader,
        reader.mapping(obj.get("spec"), "spec"),
        "spec",
        labels=reader.strings(reader.metadata.get("labels"), "metadata.labels"),
        volume_zones=tuple(volume_zones),
    )


def template_pod_from_k8s(obj: KubeObject, kind: str = "DaemonSet") -> Pod:
    """The pod a workload's spec.template describes, named after the workload: what a
    DaemonSet runs on every node it selects, or (in `daiku plan`) each replica of a Deployment,
    ReplicaSet, StatefulSet or Job before its controller names it. Errors name the workload."""
    reader = _Reader(obj, kind)
    template = reader.mapping(
        reader.mapping(obj.get("spec"), "spec").get("template"), "spec.template"
    )
    template_metadata = reader.mapping(template.get("metadata"), "spec.template.metadata")
    return _pod_from_spec(
        reader,
        reader.mapping(template.get("spec"), "spec.template.spec"),
        "spec.template.spec",
        labels=reader.strings(template_metadata.get("labels"), "spec.template.metadata.labels"),
        volume_zones=(),
    )


def daemonset_pod_from_k8s(obj: KubeObject) -> Pod:
    """The pod a DaemonSet would run on every node it selects (from spec.template)."""
    return template_pod_from_k8s(obj, "DaemonSet")


def _pod_from_spec(
    reader: _Reader,
    spec: dict[str, Any],
    at: str,
    *,
    labels: dict[str, str],
    volume_zones: tuple[str, ...],
) -> Pod:
    containers = reader.items(spec.get("containers"), f"{at}.containers")
    init_containers = reader.items(spec.get("initContainers"), f"{at}.initContainers")
    affinity = reader.mapping(spec.get("affinity"), f"{at}.affinity")
    node_affinity = reader.mapping(affinity.get("nodeAffinity"), f"{at}.affinity.nodeAffinity")
    return Pod(
        name=reader.name,
        namespace=reader.namespace or "default",
        labels=labels,
        containers=tuple(
            _container_requests(reader, c, f"{at}.containers[{i}]")
            for i, c in enumerate(containers)
        ),
        init_containers=tuple(
            InitContainer(
                requests=_container_requests(reader, c, f"{at}.initContainers[{i}]"),
                is_sidecar=reader.mapping(c, f"{at}.initContainers[{i}]").get("restartPolicy")
                == "Always",
            )
            for i, c in enumerate(init_containers)
        ),
        overhead=Resources.from_mapping(reader.resources(spec.get("overhead"), f"{at}.overhead")),
        node_selector=reader.strings(spec.get("nodeSelector"), f"{at}.nodeSelector"),
        required_node_affinity=_required_node_affinity(
            reader, node_affinity, f"{at}.affinity.nodeAffinity"
        ),
        preferred_node_affinity=_preferred_node_affinity(
            reader, node_affinity, f"{at}.affinity.nodeAffinity"
        ),
        tolerations=_tolerations(reader, spec, at),
        topology_spread=tuple(
            _spread(reader, c, f"{at}.topologySpreadConstraints[{i}]")
            for i, c in enumerate(
                reader.items(
                    spec.get("topologySpreadConstraints"), f"{at}.topologySpreadConstraints"
                )
            )
        ),
        pod_affinity=_required_pod_terms(reader, affinity, "podAffinity", at),
        pod_anti_affinity=_required_pod_terms(reader, affinity, "podAntiAffinity", at),
        preferred_pod_affinity=_preferred_pod_terms(reader, affinity, "podAffinity", at),
        preferred_pod_anti_affinity=_preferred_pod_terms(reader, affinity, "podAntiAffinity", at),
        host_ports=_host_ports(reader, containers, at),
        volume_zones=volume_zones,
    )


def _container_requests(reader: _Reader, value: Any, at: str) -> Resources:
    container = reader.mapping(value, at)
    resources = reader.mapping(container.get("resources"), f"{at}.resources")
    limits = reader.resources(resources.get("limits"), f"{at}.resources.limits")
    requests = reader.resources(resources.get("requests"), f"{at}.resources.requests")
    return Resources.from_mapping({**limits, **requests})


def _required_node_affinity(
    reader: _Reader, node_affinity: dict[str, Any], at: str
) -> tuple[tuple[Requirement, ...], ...]:
    field = f"{at}.requiredDuringSchedulingIgnoredDuringExecution"
    required = reader.mapping(
        node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution"), field
    )
    terms = reader.items(required.get("nodeSelectorTerms"), f"{field}.nodeSelectorTerms")
    return tuple(
        reader.requirements(
            reader.mapping(term, f"{field}.nodeSelectorTerms[{i}]").get("matchExpressions"),
            f"{field}.nodeSelectorTerms[{i}].matchExpressions",
        )
        for i, term in enumerate(terms)
    )


def _preferred_node_affinity(
    reader: _Reader, node_affinity: dict[str, Any], at: str
) -> tuple[PreferredNodeAffinityTerm, ...]:
    field = f"{at}.preferredDuringSchedulingIgnoredDuringExecution"
    result = []
    for i, value in enumerate(
        reader.items(node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution"), field)
    ):
        term = reader.mapping(value, f"{field}[{i}]")
        preference = reader.mapping(term.get("preference"), f"{field}[{i}].preference")
        result.append(
            PreferredNodeAffinityTerm(
                weight=reader.integer(term.get("weight"), f"{field}[{i}].weight"),
                requirements=reader.requirements(
                    preference.get("matchExpressions"), f"{field}[{i}].preference.matchExpressions"
                ),
            )
        )
    return tuple(result)


def tolerations_from_k8s(obj: KubeObject) -> tuple[Toleration, ...]:
    """A Pod's tolerations alone, read as `pod_from_k8s` reads them: the drain asks only
    whether a pod tolerates the disrupted taint, and must not read them another way."""
    reader = _Reader(obj, "Pod")
    return _tolerations(reader, reader.mapping(obj.get("spec"), "spec"), "spec")


def _tolerations(reader: _Reader, spec: dict[str, Any], at: str) -> tuple[Toleration, ...]:
    return tuple(
        _toleration(reader, t, f"{at}.tolerations[{i}]")
        for i, t in enumerate(reader.items(spec.get("tolerations"), f"{at}.tolerations"))
    )


def _toleration(reader: _Reader, value: Any, at: str) -> Toleration:
    toleration = reader.mapping(value, at)
    operator = reader.text(toleration.get("operator"), f"{at}.operator", default="Equal")
    if operator not in ("Equal", "Exists"):
        raise reader.error(f"{at}.operator", f"unknown toleration operator {operator!r}")
    effect = toleration.get("effect")
    return Toleration(
        key=reader.text(toleration.get("key"), f"{at}.key", default=""),
        operator=operator,
        value=reader.text(toleration.get("value"), f"{at}.value", default=""),
        effect=reader.effect(effect, f"{at}.effect") if effect else None,
    )


def _spread(reader: _Reader, value: Any, at: str) -> TopologySpreadConstraint:
    constraint = reader.mapping(value, at)
    when = reader.text(
        constraint.get("whenUnsatisfiable"), f"{at}.whenUnsatisfiable", default="DoNotSchedule"
    )
    try:
        when_unsatisfiable = WhenUnsatisfiable(when)
    except ValueError as error:
        raise reader.error(f"{at}.whenUnsatisfiable", f"unknown value {when!r}") from error
    min_domains = constraint.get("minDomains")
    return TopologySpreadConstraint(
        topology_key=reader.required_text(constraint.get("topologyKey"), f"{at}.topologyKey"),
        max_skew=reader.integer(constraint.get("maxSkew"), f"{at}.maxSkew", default=1),
        when_unsatisfiable=when_unsatisfiable,
        label_selector=reader.label_selector(
            constraint.get("labelSelector"), f"{at}.labelSelector"
        ),
        min_domains=reader.integer(min_domains, f"{at}.minDomains")
        if min_domains is not None
        else None,
        node_affinity_policy_honor=reader.text(
            constraint.get("nodeAffinityPolicy"), f"{at}.nodeAffinityPolicy", default="Honor"
        )
        == "Honor",
        node_taints_policy_honor=reader.text(
            constraint.get("nodeTaintsPolicy"), f"{at}.nodeTaintsPolicy", default="Ignore"
        )
        == "Honor",
        match_label_keys=tuple(
            reader.text(k, f"{at}.matchLabelKeys[{i}]")
            for i, k in enumerate(
                reader.items(constraint.get("matchLabelKeys"), f"{at}.matchLabelKeys")
            )
        ),
    )


def _pod_affinity_term(reader: _Reader, value: Any, at: str) -> PodAffinityTerm:
    term = reader.mapping(value, at)
    return PodAffinityTerm(
        topology_key=reader.required_text(term.get("topologyKey"), f"{at}.topologyKey"),
        label_selector=reader.label_selector(term.get("labelSelector"), f"{at}.labelSelector")
        or LabelSelector(),
        namespaces=tuple(
            reader.text(n, f"{at}.namespaces[{i}]")
            for i, n in enumerate(reader.items(term.get("namespaces"), f"{at}.namespaces"))
        ),
        namespace_selector=reader.label_selector(
            term.get("namespaceSelector"), f"{at}.namespaceSelector"
        ),
    )


def _required_pod_terms(
    reader: _Reader, affinity: dict[str, Any], kind: str, at: str
) -> tuple[PodAffinityTerm, ...]:
    field = f"{at}.affinity.{kind}.requiredDuringSchedulingIgnoredDuringExecution"
    section = reader.mapping(affinity.get(kind), f"{at}.affinity.{kind}")
    return tuple(
        _pod_affinity_term(reader, t, f"{field}[{i}]")
        for i, t in enumerate(
            reader.items(section.get("requiredDuringSchedulingIgnoredDuringExecution"), field)
        )
    )


def _preferred_pod_terms(
    reader: _Reader, affinity: dict[str, Any], kind: str, at: str
) -> tuple[WeightedPodAffinityTerm, ...]:
    field = f"{at}.affinity.{kind}.preferredDuringSchedulingIgnoredDuringExecution"
    section = reader.mapping(affinity.get(kind), f"{at}.affinity.{kind}")
    result = []
    for i, value in enumerate(
        reader.items(section.get("preferredDuringSchedulingIgnoredDuringExecution"), field)
    ):
        weighted = reader.mapping(value, f"{field}[{i}]")
        result.append(
            WeightedPodAffinityTerm(
                weight=reader.integer(weighted.get("weight"), f"{field}[{i}].weight"),
                term=_pod_affinity_term(
                    reader, weighted.get("podAffinityTerm"), f"{field}[{i}].podAffinityTerm"
                ),
            )
        )
    return tuple(result)


def _host_ports(reader: _Reader, containers: list[Any], at: str) -> tuple[HostPort, ...]:
    ports = []
    for i, value in enumerate(containers):
        container = reader.mapping(value, f"{at}.containers[{i}]")
        for j, port_value in enumerate(
            reader.items(container.get("ports"), f"{at}.containers[{i}].ports")
        ):
            field = f"{at}.containers[{i}].ports[{j}]"
            port = reader.mapping(port_value, field)
            host_port = port.get("hostPort")
            if not host_port:
                continue
            ports.append(
                HostPort(
                    port=reader.integer(host_port, f"{field}.hostPort"),
                    protocol=reader.text(port.get("protocol"), f"{field}.protocol", default="TCP"),
                    host_ip=reader.text(port.get("hostIP"), f"{field}.hostIP", default="")
                    or "0.0.0.0",  # noqa: S104 - Kubernetes' default: every address
                )
            )
    return tuple(ports)


# -- namespaces, nodes, NodeClaims, NodePools -----------------------------------------------------


def zone_ids_from_node_class(obj: KubeObject) -> dict[str, str]:
    """Zone -> zone id from an EC2NodeClass's resolved subnets (``status.subnets[].zoneID``,
    where Karpenter's AWS provider learns them too). Entries without both are skipped: the
    status is daiku's own writing, and a missing id only leaves the label off."""
    status = obj.get("status") if isinstance(obj, dict) else None
    subnets = status.get("subnets") if isinstance(status, dict) else None
    ids: dict[str, str] = {}
    for subnet in subnets if isinstance(subnets, list) else ():
        if isinstance(subnet, dict):
            zone, zone_id = subnet.get("zone"), subnet.get("zoneID")
            if isinstance(zone, str) and isinstance(zone_id, str) and zone and zone_id:
                ids[zone] = zone_id
    return ids


def node_class_name_of(obj: KubeObject) -> str | None:
    """The EC2NodeClass a NodeClaim (``spec.nodeClassRef``) or a NodePool
    (``spec.template.spec.nodeClassRef``) names; None when it names none (or the reference is
    not an object with a name)."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return None
    if obj.get("kind") == "NodePool" or "template" in spec:
        template = spec.get("template")
        template_spec = template.get("spec") if isinstance(template, dict) else None
        spec = template_spec if isinstance(template_spec, dict) else {}
    ref = spec.get("nodeClassRef")
    name = ref.get("name") if isinstance(ref, dict) else None
    return str(name) if name else None


def namespace_labels_from_k8s(obj: KubeObject) -> dict[str, str]:
    """A Namespace's labels (what pod (anti-)affinity's namespaceSelector selects on)."""
    reader = _Reader(obj, "Namespace")
    return reader.strings(reader.metadata.get("labels"), "metadata.labels")


def node_from_k8s(obj: KubeObject, *, pods: Iterable[Pod] = ()) -> Node:
    """The solver's view of a Node with the pods bound to it."""
    reader = _Reader(obj, "Node")
    spec = reader.mapping(obj.get("spec"), "spec")
    status = reader.mapping(obj.get("status"), "status")
    capacity = reader.resources(status.get("capacity"), "status.capacity")
    # What a kubelet always reports, a hand-written Node (`daiku plan`) may leave out: a
    # resource missing from allocatable is its capacity, and pods default to kubelet's maxPods.
    allocatable = {
        "pods": _DEFAULT_MAX_PODS,
        **capacity,
        **reader.resources(status.get("allocatable"), "status.allocatable"),
    }
    return Node(
        name=reader.name,
        labels=reader.strings(reader.metadata.get("labels"), "metadata.labels"),
        taints=reader.taints(spec.get("taints"), "spec.taints"),
        allocatable=Resources.from_mapping(allocatable),
        capacity=Resources.from_mapping(capacity) if capacity else None,
        pods=tuple(pods),
    )


def node_from_nodeclaim(obj: KubeObject, *, pods: Iterable[Pod] = ()) -> Node:
    """A NodeClaim whose node has not registered yet, as an in-flight Node the solver can put
    pods on (so no second claim is launched for them)."""
    reader = _Reader(obj, "NodeClaim")
    spec = reader.mapping(obj.get("spec"), "spec")
    status = reader.mapping(obj.get("status"), "status")
    labels = {
        r.key: r.values[0]
        for r in reader.requirements(spec.get("requirements"), "spec.requirements")
        if r.operator is Operator.IN and len(r.values) == 1
    }
    labels.update(reader.strings(reader.metadata.get("labels"), "metadata.labels"))
    allocatable = reader.resources(status.get("allocatable"), "status.allocatable")
    if not allocatable:
        resources = reader.mapping(spec.get("resources"), "spec.resources")
        allocatable = reader.resources(resources.get("requests"), "spec.resources.requests")
    capacity = reader.resources(status.get("capacity"), "status.capacity")
    return Node(
        name=reader.name,
        labels=labels,
        taints=reader.taints(spec.get("taints"), "spec.taints"),
        allocatable=Resources.from_mapping(allocatable),
        capacity=Resources.from_mapping(capacity) if capacity else None,
        pods=tuple(pods),
        is_in_flight=True,
    )


def nodepool_from_k8s(obj: KubeObject) -> NodePool:
    """A NodePool's template and limits (Karpenter v1 field names)."""
    reader = _Reader(obj, "NodePool")
    spec = reader.mapping(obj.get("spec"), "spec")
    template = reader.mapping(spec.get("template"), "spec.template")
    template_metadata = reader.mapping(template.get("metadata"), "spec.template.metadata")
    template_spec = reader.mapping(template.get("spec"), "spec.template.spec")
    limits_field = reader.mapping(spec.get("limits"), "spec.limits")
    limits = reader.resources(limits_field, "spec.limits")
    requirements = reader.requirements(
        template_spec.get("requirements"), "spec.template.spec.requirements"
    )
    for i, requirement in enumerate(requirements):
        if requirement.key in RESTRICTED_NODEPOOL_KEYS:
            raise reader.error(
                f"spec.template.spec.requirements[{i}].key",
                f"{requirement.key} is restricted: daiku sets it on each node itself",
            )
    labels = reader.strings(template_metadata.get("labels"), "spec.template.metadata.labels")
    # Refused here, not left to the solver: the pool would show Ready and never take a pod.
    contradicted = contradiction(requirements, labels)
    if contradicted is not None:
        raise reader.error("spec.template", contradicted)
    return NodePool(
        name=reader.name,
        requirements=requirements,
        labels=labels,
        taints=reader.taints(template_spec.get("taints"), "spec.template.spec.taints"),
        startup_taints=reader.taints(
            template_spec.get("startupTaints"), "spec.template.spec.startupTaints"
        ),
        weight=reader.integer(spec.get("weight"), "spec.weight", default=0),
        limits=NodePoolLimits(
            cpu_millis=limits.get("cpu"),
            memory_bytes=limits.get("memory"),
            nodes=limits.get("nodes"),
        ),
        replicas=_static_replicas(reader, spec, limits),
    )


def _static_replicas(reader: _Reader, spec: dict[str, Any], limits: dict[str, int]) -> int | None:
    """spec.replicas of a static NodePool (None: dynamic), refused with the CRD's messages when
    it comes with a limit other than nodes or a weight (Karpenter's rules)."""
    if spec.get("replicas") is None:
        return None
    replicas = reader.integer(spec.get("replicas"), "spec.replicas")
    if replicas < 0:
        raise reader.error("spec.replicas", f"must be at least 0, got {replicas}")
    other = sorted(set(limits) - {"nodes"})
    if other:
        raise reader.error(
            f"spec.limits.{other[0]}", "only 'limits.nodes' is supported on static NodePools"
        )
    if spec.get("weight") is not None:
        raise reader.error("spec.weight", "'weight' is not supported on static NodePools")
    return replicas


def _pvc_zone_requirements(pv: Mapping[str, Any]) -> tuple[str, ...]:
    spec = pv.get("spec")
    node_affinity = spec.get("nodeAffinity") if isinstance(spec, dict) else None
    required = node_affinity.get("required") if isinstance(node_affinity, dict) else None
    terms = required.get("nodeSelectorTerms") if isinstance(required, dict) else None
    zones: list[str] = []
    for term in terms if isinstance(terms, list) else []:
        for expression in term.get("matchExpressions") or [] if isinstance(term, dict) else []:
            if (
                isinstance(expression, dict)
                and expression.get("key")
                in ("topology.kubernetes.io/zone", "topology.ebs.csi.aws.com/zone")
                and expression.get("operator") == "In"
            ):
                zones.extend(v for v in expression.get("values") or [] if isinstance(v, str))
    return tuple(dict.fromkeys(zones))


def volume_zones_of(
    pod: KubeObject,
    claims: Mapping[str, KubeObject],
    volumes: Mapping[str, KubeObject],
) -> tuple[str, ...]:
    """Zones the pod's bound PersistentVolumes allow (empty: unconstrained). `claims` is keyed
    "namespace/name", `volumes` by name, as the cluster mirror keys them. Unbound claims and
    volumes without zone affinity constrain nothing; volumes in disjoint zones raise
    InvalidObjectError (no node can ever mount them all)."""
    spec = pod.get("spec")
    metadata = pod.get("metadata")
    namespace = metadata.get("namespace", "default") if isinstance(metadata, dict) else "default"
    allowed: set[str] | None = None
    for volume in spec.get("volumes") or [] if isinstance(spec, dict) else []:
        source = volume.get("persistentVolumeClaim") if isinstance(volume, dict) else None
        if not isinstance(source, dict):
            continue
        claim = claims.get(f"{namespace}/{source.get('claimName')}")
        claim_spec = claim.get("spec") if claim else None
        volume_name = claim_spec.get("volumeName") if isinstance(claim_spec, dict) else None
        pv = volumes.get(volume_name) if isinstance(volume_name, str) else None
        zones = _pvc_zone_requirements(pv) if pv else ()
        if zones:
            allowed = set(zones) if allowed is None else allowed & set(zones)
    if allowed is None:
        return ()
    if not allowed:
        name = metadata.get("name") if isinstance(metadata, dict) else None
        raise InvalidObjectError(
            kind="Pod",
            name=f"{namespace}/{name}",
            field="spec.volumes",
            reason="its persistent volumes are in disjoint zones",
        )
    return tuple(sorted(allowed))


# -- EC2NodeClass -> launch settings -----------------------------------------------------------


def node_class_from_k8s(obj: KubeObject) -> NodeClassSpec:
    """The launch-relevant part of an EC2NodeClass."""
    reader = _Reader(obj, "EC2NodeClass")
    spec = reader.mapping(obj.get("spec"), "spec")

    def terms(field: str) -> list[tuple[str, dict[str, Any]]]:
        return [
            (f"spec.{field}[{i}]", reader.mapping(term, f"spec.{field}[{i}]"))
            for i, term in enumerate(reader.items(spec.get(field), f"spec.{field}"))
        ]

    def text(value: Any, field: str) -> str:
        return reader.text(value, field, default="")

    def tags(value: Any, field: str) -> Pairs:
        return pairs(reader.strings(value, field))

    metadata_options = reader.mapping(spec.get("metadataOptions"), "spec.metadataOptions")
    strategy = reader.mapping(spec.get("fleetAllocationStrategy"), "spec.fleetAllocationStrategy")
    return NodeClassSpec(
        name=reader.name,
        subnet_terms=tuple(
            SubnetTerm(tags=tags(t.get("tags"), f"{at}.tags"), id=text(t.get("id"), f"{at}.id"))
            for at, t in terms("subnetSelectorTerms")
        ),
        security_group_terms=tuple(
            SecurityGroupTerm(
                tags=tags(t.get("tags"), f"{at}.tags"),
                id=text(t.get("id"), f"{at}.id"),
                name=text(t.get("name"), f"{at}.name"),
            )
            for at, t in terms("securityGroupSelectorTerms")
        ),
        ami_terms=tuple(
            AmiTerm(
                id=text(t.get("id"), f"{at}.id"),
                name=text(t.get("name"), f"{at}.name"),
                alias=text(t.get("alias"), f"{at}.alias"),
                tags=tags(t.get("tags"), f"{at}.tags"),
                owner=text(t.get("owner"), f"{at}.owner"),
            )
            for at, t in terms("amiSelectorTerms")
        ),
        tags=tags(spec.get("tags"), "spec.tags"),
        user_data=text(spec.get("userData"), "spec.userData"),
        role=text(spec.get("role"), "spec.role"),
        instance_profile=text(spec.get("instanceProfile"), "spec.instanceProfile"),
        block_device_mappings=tuple(
            _block_device_mapping(reader, m, at) for at, m in terms("blockDeviceMappings")
        ),
        metadata_options=MetadataOptions(
            http_endpoint=text(
                metadata_options.get("httpEndpoint"), "spec.metadataOptions.httpEndpoint"
            ),
            http_protocol_ipv6=text(
                metadata_options.get("httpProtocolIPv6"), "spec.metadataOptions.httpProtocolIPv6"
            ),
            http_put_response_hop_limit=reader.integer(
                metadata_options.get("httpPutResponseHopLimit"),
                "spec.metadataOptions.httpPutResponseHopLimit",
                default=0,
            ),
            http_tokens=text(metadata_options.get("httpTokens"), "spec.metadataOptions.httpTokens"),
        ),
        ami_family=text(spec.get("amiFamily"), "spec.amiFamily"),
        associate_public_ip_address=bool(spec.get("associatePublicIPAddress", False)),
        capacity_reservation_terms=tuple(
            CapacityReservationTerm(
                id=text(t.get("id"), f"{at}.id"),
                tags=tags(t.get("tags"), f"{at}.tags"),
                owner_id=text(t.get("ownerID"), f"{at}.ownerID"),
            )
            for at, t in terms("capacityReservationSelectorTerms")
        ),
        spot_allocation_strategy=text(strategy.get("spot"), "spec.fleetAllocationStrategy.spot"),
        on_demand_allocation_strategy=text(
            strategy.get("onDemand"), "spec.fleetAllocationStrategy.onDemand"
        ),
    )


def capacity_reservations_from_k8s(obj: KubeObject) -> tuple[CapacityReservation, ...]:
    """The reservations an EC2NodeClass's status lists (status.capacityReservations, written
    by the status controller from ResolveNodeClass); a malformed entry raises
    InvalidObjectError naming it."""
    reader = _Reader(obj, "EC2NodeClass")
    status = reader.mapping(obj.get("status"), "status")
    found = []
    for i, item in enumerate(
        reader.items(status.get("capacityReservations"), "status.capacityReservations")
    ):
        at = f"status.capacityReservations[{i}]"
        entry = reader.mapping(item, at)
        end = reader.text(entry.get("endTime"), f"{at}.endTime", default="")
        try:
            end_time = datetime.fromisoformat(end) if end else None
        except ValueError as error:
            raise reader.error(f"{at}.endTime", f"not an RFC 3339 time: {end!r}") from error
        found.append(
            CapacityReservation(
                id=reader.text(entry.get("id"), f"{at}.id", default=""),
                instance_type=reader.text(
                    entry.get("instanceType"), f"{at}.instanceType", default=""
                ),
                zone=reader.text(
                    entry.get("availabilityZone"), f"{at}.availabilityZone", default=""
                ),
                reservation_type=reader.text(
                    entry.get("reservationType"), f"{at}.reservationType", default="default"
                ),
                available=reader.integer(
                    entry.get("availableInstanceCount"), f"{at}.availableInstanceCount", default=0
                ),
                total=reader.integer(
                    entry.get("totalInstanceCount"), f"{at}.totalInstanceCount", default=0
                ),
                owner_id=reader.text(entry.get("ownerID"), f"{at}.ownerID", default=""),
                instance_match_criteria=reader.text(
                    entry.get("instanceMatchCriteria"), f"{at}.instanceMatchCriteria", default=""
                ),
                end_time=end_time,
                state=reader.text(entry.get("state"), f"{at}.state", default="active"),
            )
        )
    return tuple(found)


def _block_device_mapping(reader: _Reader, mapping: dict[str, Any], at: str) -> BlockDeviceMapping:
    ebs = reader.mapping(mapping.get("ebs"), f"{at}.ebs")
    size = reader.resources(
        {"storage": ebs["volumeSize"]} if "volumeSize" in ebs else {}, f"{at}.ebs.volumeSize"
    )
    return BlockDeviceMapping(
        device_name=reader.text(mapping.get("deviceName"), f"{at}.deviceName", default=""),
        root_volume=bool(mapping.get("rootVolume", False)),
        volume_size_bytes=size.get("storage", 0),
        volume_type=reader.text(ebs.get("volumeType"), f"{at}.ebs.volumeType", default=""),
        iops=reader.integer(ebs.get("iops"), f"{at}.ebs.iops", default=0),
        throughput_mibps=reader.integer(ebs.get("throughput"), f"{at}.ebs.throughput", default=0),
        encrypted=bool(ebs.get("encrypted", False)),
        kms_key_id=reader.text(ebs.get("kmsKeyID"), f"{at}.ebs.kmsKeyID", default=""),
        delete_on_termination=bool(ebs.get("deleteOnTermination", True)),
        snapshot_id=reader.text(ebs.get("snapshotID"), f"{at}.ebs.snapshotID", default=""),
        max_volume_size_bytes=_max_volume_size(reader, ebs, size.get("storage", 0), at),
    )


def _max_volume_size(reader: _Reader, ebs: dict[str, Any], size_bytes: int, at: str) -> int:
    """ebs.maxVolumeSize in bytes (0: unset); refused below volumeSize (the CRD cannot compare
    two quantities, so the converter does, for the live scheduler and `daiku plan` alike)."""
    if "maxVolumeSize" not in ebs:
        return 0
    field = f"{at}.ebs.maxVolumeSize"
    cap = reader.resources({"storage": ebs["maxVolumeSize"]}, field).get("storage", 0)
    if cap < size_bytes:
        raise reader.error(
            field, f"{ebs['maxVolumeSize']} is below volumeSize {ebs.get('volumeSize')}"
        )
    return cap


def kubelet_from_k8s(obj: KubeObject) -> KubeletSpec | None:
    """An EC2NodeClass's spec.kubelet (None: unset)."""
    reader = _Reader(obj, "EC2NodeClass")
    spec = reader.mapping(obj.get("spec"), "spec")
    if spec.get("kubelet") is None:
        return None
    kubelet = reader.mapping(spec.get("kubelet"), "spec.kubelet")
    max_pods = kubelet.get("maxPods")
    pods_per_core = kubelet.get("podsPerCore")
    return KubeletSpec(
        system_reserved=pairs(
            reader.strings(kubelet.get("systemReserved"), "spec.kubelet.systemReserved")
        ),
        kube_reserved=pairs(
            reader.strings(kubelet.get("kubeReserved"), "spec.kubelet.kubeReserved")
        ),
        eviction_hard=pairs(
            reader.strings(kubelet.get("evictionHard"), "spec.kubelet.evictionHard")
        ),
        cluster_dns=tuple(
            reader.text(d, f"spec.kubelet.clusterDNS[{i}]")
            for i, d in enumerate(
                reader.items(kubelet.get("clusterDNS"), "spec.kubelet.clusterDNS")
            )
        ),
        max_pods=None if max_pods is None else reader.integer(max_pods, "spec.kubelet.maxPods"),
        pods_per_core=None
        if pods_per_core is None
        else reader.integer(pods_per_core, "spec.kubelet.podsPerCore"),
    )


# -- NodeOverlays -------------------------------------------------------------------------------


def node_overlay_from_k8s(obj: KubeObject) -> NodeOverlay:
    """A NodeOverlay (``daiku.dev/v1alpha1``, Karpenter's ``karpenter.sh/v1alpha1`` fields)."""
    reader = _Reader(obj, "NodeOverlay")
    spec = reader.mapping(obj.get("spec"), "spec")
    price_text = spec.get("price")
    adjustment_text = spec.get("priceAdjustment")
    if price_text is not None and adjustment_text is not None:
        raise reader.error("spec", "cannot set both 'price' and 'priceAdjustment'")
    price: float | None = None
    if price_text is not None:
        try:
            price = float(reader.text(str(price_text), "spec.price"))
        except ValueError:
            raise reader.error("spec.price", f"{price_text!r} is not a price") from None
        if price < 0:
            raise reader.error("spec.price", f"{price_text!r} is negative")
    adjustment: PriceAdjustment | None = None
    if adjustment_text is not None:
        try:
            adjustment = PriceAdjustment.parse(
                reader.text(str(adjustment_text), "spec.priceAdjustment")
            )
        except OverlayError as error:
            raise reader.error("spec.priceAdjustment", str(error)) from None
    capacity = reader.resources(spec.get("capacity"), "spec.capacity")
    for resource in sorted(BASE_RESOURCES.intersection(capacity)):
        raise reader.error(
            f"spec.capacity.{resource}", "only extended resources may be added, not " + resource
        )
    weight = reader.integer(spec.get("weight"), "spec.weight", default=0)
    return NodeOverlay(
        name=reader.name,
        requirements=reader.requirements(spec.get("requirements"), "spec.requirements"),
        price=price,
        price_adjustment=adjustment,
        capacity=tuple(sorted(capacity.items())),
        weight=weight,
    )


# -- CapacityBuffers ----------------------------------------------------------------------------


def capacity_buffer_from_k8s(obj: KubeObject) -> CapacityBuffer:
    """A CapacityBuffer (``daiku.dev/v1alpha1``): exactly one of replicas and percentage."""
    reader = _Reader(obj, "CapacityBuffer")
    spec = reader.mapping(obj.get("spec"), "spec")
    pool_ref = reader.mapping(spec.get("nodePoolRef"), "spec.nodePoolRef")
    nodepool = reader.required_text(pool_ref.get("name"), "spec.nodePoolRef.name")
    requests = reader.resources(spec.get("requests"), "spec.requests")
    if not any(requests.values()):
        raise reader.error("spec.requests", "required: the shape of one unit of room")
    replicas = spec.get("replicas")
    percentage = spec.get("percentage")
    if (replicas is None) == (percentage is None):
        raise reader.error(
            "spec", "set exactly one of 'replicas' or 'percentage' (of the NodePool's requests)"
        )
    if replicas is not None:
        replicas = reader.integer(replicas, "spec.replicas")
        if replicas < 0:
            raise reader.error("spec.replicas", f"headroom cannot be negative, got {replicas}")
    if percentage is not None:
        percentage = reader.integer(percentage, "spec.percentage")
        if percentage < 0:
            raise reader.error("spec.percentage", f"headroom cannot be negative, got {percentage}")
    limits = spec.get("limits")
    return CapacityBuffer(
        name=reader.name,
        nodepool=nodepool,
        requests=Resources.from_mapping(requests),
        replicas=replicas,
        percentage=percentage,
        limits=None
        if limits is None
        else Resources.from_mapping(reader.resources(limits, "spec.limits")),
    )
