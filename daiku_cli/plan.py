"""`daiku plan`: what daiku would launch for these manifests, offline.

Reads Kubernetes objects (YAML or JSON, several documents or ``kind: List``): NodePool
(``daiku.dev/v1`` or ``karpenter.sh/v1``), NodeClaim, EC2NodeClass (the reservations its
``status.capacityReservations`` lists become reserved offerings, each for as many claims as it
has free instances), RuntimeClass (its overhead goes to the pods naming it), Pod, Deployment /
ReplicaSet / StatefulSet / Job (expanded to their replicas), DaemonSet, Node (pods with
``spec.nodeName`` run on it), PersistentVolumeClaim, PersistentVolume and Namespace (its labels
are what pod (anti-)affinity's namespaceSelector selects; a namespace without an object has only
`kubernetes.io/metadata.name`). The objects are converted by the live scheduler's own converter
(see "Reading manifests" below). Solves with ``scheduler_svc.core`` against an instance-type
catalog (``--catalog`` JSON as ``daiku catalog -o json`` prints it, else the bundled us-east-1
catalog) and prints the plan.

Exit status (`daiku_cli.exit_codes`): 0 when every pod is planned; 1 when the plan leaves pods
unschedulable (they are listed with their reason; `--allow-unschedulable` makes that 0); 2 on
bad input: the message names the file, object and field (YAML errors keep their lines), and no
plan is printed.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml

from actuator_svc.core.allocatable import NodeResources, allocatable_from_capacity
from daiku_cli import exit_codes
from daiku_cli.headroom_plan import headroom_lines, plan_headroom
from daiku_cli.main import DaikuCommand, app
from daiku_cli.root_volume_plan import (
    RootVolumes,
    explain_root_volume,
    read_root_volumes,
    root_volume_entry,
    with_cap_ephemeral_storage,
    with_cap_reasons,
)
from daiku_cli.static_plan import plan_static, with_static_claims
from scheduler_svc.core import (
    InstanceType,
    Offering,
    Pod,
    QuantityError,
    Resources,
    SchedulingInput,
    SchedulingResult,
    explain_pod,
    solve,
)
from scheduler_svc.core.headroom import CapacityBuffer
from scheduler_svc.core.model import MinValuesPolicy
from scheduler_svc.core.overlay import NodeOverlay, apply_overlays, overlay_conflicts
from scheduler_svc.core.reservations import (
    CapacityReservation,
    assign_reservations,
    reservation_room,
    with_reserved_offerings,
)
from scheduler_svc.errors import InvalidObjectError
from scheduler_svc.kube.convert import (
    cached_resource_units,
    capacity_reservations_from_k8s,
    template_pod_from_k8s,
    volume_zones_of,
)
from scheduler_svc.kube.events import ObjectEvent
from scheduler_svc.kube.resources import (
    CAPACITY_BUFFERS,
    DAEMON_SETS,
    NAMESPACES,
    NODE_CLAIMS,
    NODE_OVERLAYS,
    NODE_POOLS,
    NODES,
    PERSISTENT_VOLUME_CLAIMS,
    PERSISTENT_VOLUMES,
    PODS,
    Resource,
)
from scheduler_svc.state.cluster import ClusterMirror, is_pending_pod
from scheduler_svc.state.core_snapshot import CoreSnapshot, CoreSnapshotter

NODEPOOL_API_VERSIONS = {"daiku.dev/v1", "karpenter.sh/v1"}
NODEOVERLAY_API_VERSIONS = {"daiku.dev/v1alpha1", "karpenter.sh/v1alpha1"}
CAPACITYBUFFER_API_VERSIONS = {"daiku.dev/v1alpha1"}
WORKLOAD_KINDS = {"Deployment", "ReplicaSet", "StatefulSet", "Job"}
# Kinds plan reads, by the mirror resource they go to (the live scheduler's watches).
MIRRORED_KINDS: dict[str, Resource] = {
    "Pod": PODS,
    "Node": NODES,
    "NodePool": NODE_POOLS,
    "NodeClaim": NODE_CLAIMS,
    "NodeOverlay": NODE_OVERLAYS,
    "CapacityBuffer": CAPACITY_BUFFERS,
    "DaemonSet": DAEMON_SETS,
    "PersistentVolumeClaim": PERSISTENT_VOLUME_CLAIMS,
    "PersistentVolume": PERSISTENT_VOLUMES,
    "Namespace": NAMESPACES,
}
CLUSTER_SCOPED_KINDS = {
    "Node",
    "NodePool",
    "NodeClaim",
    "NodeOverlay",
    "CapacityBuffer",
    "PersistentVolume",
    "RuntimeClass",
    "Namespace",
}
KNOWN_KINDS = ", ".join([*MIRRORED_KINDS, *sorted(WORKLOAD_KINDS), "RuntimeClass", "EC2NodeClass"])


class PlanInputError(ValueError):
    """Input that cannot be planned; the message names file, object and field."""


class OutputFormat(StrEnum):
    """How the plan is printed."""

    table = "table"
    json = "json"
    yaml = "yaml"


# ---------------------------------------------------------------------------------------------
# Reading manifests
#
# Plan does what the API server and the controllers would do to the manifests (default the
# namespace, apply a RuntimeClass's overhead, expand workloads to their replicas), then converts
# them exactly as the live scheduler does: the objects go into a `ClusterMirror` and come out
# of `CoreSnapshotter`, whose converters (`scheduler_svc.kube.convert`) serve the provisioner
# and the disruption simulator too. A workload's pod template is converted once and copied
# per replica.


@dataclass
class _Workload:
    obj: dict[str, Any]
    kind: str
    source: str


@dataclass
class Manifests:
    """Every object of the input files, as the live scheduler's mirror would hold them."""

    objects: dict[Resource, dict[str, dict[str, Any]]] = field(default_factory=dict)
    workloads: list[_Workload] = field(default_factory=list)
    # Pending pods in input order: a bare pod's key, or a workload (index into `workloads`).
    order: list[str | int] = field(default_factory=list)
    runtime_overheads: dict[str, dict[str, Any]] = field(default_factory=dict)
    # (kind, "namespace/name" or "name") -> the file it came from, for error messages.
    sources: dict[tuple[str, str], str] = field(default_factory=dict)
    # What the EC2NodeClasses' status.capacityReservations list (kubectl get -o yaml shows it).
    reservations: list[CapacityReservation] = field(default_factory=list)
    # The EC2NodeClasses by name (their launch settings: a growing root volume).
    node_classes: dict[str, dict[str, Any]] = field(default_factory=dict)

    def source_of(self, kind: str, name: str | None) -> str:
        return self.sources.get((kind, name or ""), "input")


def _display(kind: str, metadata: dict[str, Any]) -> str:
    name = str(metadata.get("name"))
    return name if kind in CLUSTER_SCOPED_KINDS else f"{metadata.get('namespace')}/{name}"


def _load_documents(text: str) -> list[Any]:
    """JSON when it is JSON (one `json.loads`, much faster than any YAML loader), else YAML
    through libyaml (`CSafeLoader`; PyYAML's pure-Python loader when libyaml is missing)."""
    stripped = text.lstrip()
    if stripped[:1] in ("{", "["):
        try:
            return [json.loads(text)]
        except ValueError:
            pass  # YAML's flow style also starts so: let the YAML loader read (and report) it
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return list(yaml.load_all(text, Loader=loader))


def _documents(path: str) -> Iterator[tuple[dict[str, Any], str]]:
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise PlanInputError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        documents = _load_documents(text)
    except yaml.YAMLError as exc:
        raise PlanInputError(f"{path}: malformed YAML/JSON:\n{exc}") from None
    for index, document in enumerate(documents):
        if document is None:
            continue
        if not isinstance(document, dict):
            raise PlanInputError(f"{path}: document {index + 1}: expected an object")
        if document.get("kind") == "List":
            items = document.get("items") or []
            if not isinstance(items, list):
                raise PlanInputError(f"{path}: document {index + 1}: field items: expected a list")
            for i, item in enumerate(items):
                if not isinstance(item, dict):
                    raise PlanInputError(f"{path}: List item {i}: expected an object")
                yield item, path
        else:
            yield document, path


def read_manifests(paths: list[str]) -> Manifests:
    """Every object of every file, checked for kind, name and apiVersion (the rest is checked
    by the converters); raises PlanInputError naming the culprit."""
    out = Manifests()
    for obj, source in (d for p in paths for d in _documents(p)):
        kind = obj.get("kind")
        metadata = obj.get("metadata")
        if not isinstance(metadata, dict):
            metadata = obj["metadata"] = {}
        name = metadata.get("name")
        if not kind or not isinstance(kind, str):
            raise PlanInputError(f"{source}: object {name!r}: field kind: required")
        if kind not in CLUSTER_SCOPED_KINDS and not metadata.get("namespace"):
            metadata["namespace"] = "default"  # kubectl's default namespace
        display = _display(kind, metadata)
        where = f"{source}: {kind} {display}"
        if not name or not isinstance(name, str):
            raise PlanInputError(f"{where}: field metadata.name: required")
        versions = {
            "NodePool": NODEPOOL_API_VERSIONS,
            "NodeOverlay": NODEOVERLAY_API_VERSIONS,
            "CapacityBuffer": CAPACITYBUFFER_API_VERSIONS,
        }
        if kind in versions and obj.get("apiVersion") not in versions[kind]:
            raise PlanInputError(
                f"{where}: field apiVersion: {obj.get('apiVersion')!r} is not one of "
                f"{sorted(versions[kind])}"
            )
        out.sources[(kind, display)] = source
        resource = MIRRORED_KINDS.get(kind)
        if resource is not None:
            objects = out.objects.setdefault(resource, {})
            if display in objects:
                raise PlanInputError(f"{where}: defined twice in the input")
            objects[display] = obj
            if kind == "Pod" and not _node_name(obj):
                out.order.append(display)
        else:
            _read_unmirrored(out, obj, source, where)
    return out


def _read_unmirrored(out: Manifests, obj: dict[str, Any], source: str, where: str) -> None:
    """A workload, RuntimeClass or EC2NodeClass (objects the scheduler's mirror does not hold)."""
    kind = obj["kind"]
    if kind in WORKLOAD_KINDS:
        out.order.append(len(out.workloads))
        out.workloads.append(_Workload(obj, kind, source))
    elif kind == "RuntimeClass":
        overhead = (obj.get("overhead") or {}).get("podFixed")
        out.runtime_overheads[obj["metadata"]["name"]] = (
            overhead if isinstance(overhead, dict) else {}
        )
    elif kind == "EC2NodeClass":  # launch settings; its reserved capacity is offered
        out.reservations += _reservations(obj, where)
        out.node_classes[obj["metadata"]["name"]] = obj
    else:
        raise PlanInputError(
            f"{where}: field kind: unknown kind {kind!r} (expected one of {KNOWN_KINDS})"
        )


def _reservations(node_class: dict[str, Any], where: str) -> tuple[CapacityReservation, ...]:
    try:
        return capacity_reservations_from_k8s(node_class)
    except InvalidObjectError as error:
        raise PlanInputError(f"{where}: {error}") from None


def _node_name(pod: dict[str, Any]) -> str | None:
    spec = pod.get("spec")
    node_name = spec.get("nodeName") if isinstance(spec, dict) else None
    return str(node_name) if node_name else None


def _admit_runtime_class(spec: Any, overheads: dict[str, dict[str, Any]]) -> None:
    """The RuntimeClass admission plugin: a pod naming a RuntimeClass with an overhead gets it
    as spec.overhead (the API server does this when it admits the pod; manifests predate it).
    A pod that names no RuntimeClass of the input keeps its own overhead."""
    if not isinstance(spec, dict) or spec.get("overhead") is not None:
        return
    overhead = overheads.get(str(spec.get("runtimeClassName") or ""))
    if overhead:
        spec["overhead"] = overhead


def _pod_spec_of(obj: dict[str, Any]) -> Any:
    spec = obj.get("spec")
    if obj.get("kind") == "Pod" or not isinstance(spec, dict):
        return spec
    template = spec.get("template")
    return template.get("spec") if isinstance(template, dict) else None


def _error(manifests: Manifests, error: InvalidObjectError) -> PlanInputError:
    source = manifests.source_of(error.kind, error.name)
    return PlanInputError(
        f"{source}: {error.kind} {error.name}: field {error.field}: {error.reason}"
    )


def _replicas(workload: _Workload, mirror: ClusterMirror) -> list[Pod]:
    """A workload's replicas: its template converted once, renamed per replica, with the zones
    each replica's bound volumes allow (a StatefulSet replica owns PVCs named
    <template>-<statefulset>-<ordinal>)."""
    obj, kind = workload.obj, workload.kind
    metadata = obj["metadata"]
    name, namespace = str(metadata["name"]), str(metadata["namespace"])
    spec_value = obj.get("spec")
    spec: dict[str, Any] = spec_value if isinstance(spec_value, dict) else {}
    count_field = "parallelism" if kind == "Job" else "replicas"
    count = spec.get(count_field, 1)
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise PlanInputError(
            f"{workload.source}: {kind} {namespace}/{name}: field spec.{count_field}: "
            f"expected a non-negative integer, got {count!r}"
        )
    template = template_pod_from_k8s(obj, kind)
    pod_spec = _pod_spec_of(obj)
    volumes = list(pod_spec.get("volumes") or []) if isinstance(pod_spec, dict) else []
    claim_templates = spec.get("volumeClaimTemplates") if kind == "StatefulSet" else None
    stateful = [
        str((t.get("metadata") or {}).get("name"))
        for t in claim_templates or []
        if isinstance(t, dict)
    ]
    uses_volumes = stateful or any(
        isinstance(v, dict) and "persistentVolumeClaim" in v for v in volumes
    )
    claims = mirror.objects(PERSISTENT_VOLUME_CLAIMS)
    pvs = mirror.objects(PERSISTENT_VOLUMES)
    pods = []
    for ordinal in range(count):
        pod_name = f"{name}-{ordinal}"
        if not uses_volumes:
            pods.append(_replica(template, name=pod_name))
            continue
        replica = {
            "metadata": {"name": pod_name, "namespace": namespace},
            "spec": {
                "volumes": volumes
                + [
                    {"persistentVolumeClaim": {"claimName": f"{t}-{name}-{ordinal}"}}
                    for t in stateful
                ]
            },
        }
        try:
            zones = volume_zones_of(replica, claims, pvs)
        except InvalidObjectError as error:
            raise PlanInputError(f"{workload.source}: {error}") from None
        pods.append(_replica(template, name=pod_name, volume_zones=zones))
    return pods


def _replica(template: Pod, **changes: Any) -> Pod:
    """A copy of `template` with `changes`, without running Pod's normalisation again (the
    template ran it): `dataclasses.replace` would, and cost most of a 20k-replica read."""
    replica = object.__new__(Pod)
    replica.__dict__.update(template.__dict__, **changes)
    return replica


def _problem(manifests: Manifests) -> tuple[list[Pod], CoreSnapshot]:
    """The pending pods (input order) and the snapshot of everything else."""
    for obj in manifests.objects.get(PODS, {}).values():
        _admit_runtime_class(obj.get("spec"), manifests.runtime_overheads)
    for obj in manifests.objects.get(DAEMON_SETS, {}).values():
        _admit_runtime_class(_pod_spec_of(obj), manifests.runtime_overheads)
    for workload in manifests.workloads:
        _admit_runtime_class(_pod_spec_of(workload.obj), manifests.runtime_overheads)
    mirror = ClusterMirror(tuple(MIRRORED_KINDS.values()), transforms={})
    for resource in MIRRORED_KINDS.values():
        for obj in manifests.objects.get(resource, {}).values():
            mirror.handle(ObjectEvent(resource, "ADDED", obj))
    snapshot = CoreSnapshotter(mirror).snapshot(pod_filter=is_pending_pod)
    if snapshot.invalid:
        raise _error(manifests, snapshot.invalid[0])
    nodes = manifests.objects.get(NODES, {})
    for key, obj in manifests.objects.get(PODS, {}).items():
        node_name = _node_name(obj)
        if node_name is not None and node_name not in nodes:
            raise PlanInputError(
                f"{manifests.source_of('Pod', key)}: Pod {key}: field spec.nodeName: "
                f"no Node {node_name!r} in the input"
            )
    bare = {p.key: p for p in snapshot.pending_pods}
    pending: list[Pod] = []
    for entry in manifests.order:
        if isinstance(entry, str):
            pending.append(bare[entry])
            continue
        workload = manifests.workloads[entry]
        try:
            pending.extend(_replicas(workload, mirror))
        except InvalidObjectError as error:
            raise _error(manifests, error) from None
    return pending, snapshot


def read_overlays(paths: list[str]) -> tuple[NodeOverlay, ...]:
    """The NodeOverlays of these files (other objects are read and ignored), converted as the
    live scheduler converts them; raises PlanInputError naming a bad one."""
    manifests = read_manifests(paths)
    mirror = ClusterMirror((NODE_OVERLAYS,), transforms={})
    for obj in manifests.objects.get(NODE_OVERLAYS, {}).values():
        mirror.handle(ObjectEvent(NODE_OVERLAYS, "ADDED", obj))
    overlays, invalid = CoreSnapshotter(mirror).overlays()
    if invalid:
        raise _error(manifests, invalid[0])
    return overlays


# ---------------------------------------------------------------------------------------------
# The catalog


class _Where:
    """Where a catalog value came from, for error messages."""

    def __init__(self, source: str, obj: str) -> None:
        self.source = source
        self.obj = obj

    def error(self, path: str, problem: str) -> PlanInputError:
        return PlanInputError(f"{self.source}: {self.obj}: field {path}: {problem}")

    def mapping(self, value: Any, path: str) -> dict[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self.error(path, f"expected a mapping, got {type(value).__name__}")
        return value

    def quantities(self, value: Any, path: str) -> dict[str, int]:
        out: dict[str, int] = {}
        for name, amount in self.mapping(value, path).items():
            if isinstance(amount, bool) or not isinstance(amount, str | int | float):
                raise self.error(f"{path}.{name}", f"{amount!r} is not a quantity")
            try:
                out[str(name)] = cached_resource_units(str(name), amount)
            except QuantityError as exc:
                raise self.error(f"{path}.{name}", str(exc)) from None
        return out


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
        capacity = where.quantities(item.get("capacity"), "capacity")
        if "allocatable" in item:
            allocatable = Resources.from_mapping(
                where.quantities(item.get("allocatable"), "allocatable")
            )
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
        raw_offerings = item.get("offerings") or []
        if not isinstance(raw_offerings, list):
            raise where.error("offerings", "expected a list")
        for j, raw_offering in enumerate(raw_offerings):
            offering = where.mapping(raw_offering, f"offerings[{j}]")
            try:
                offerings.append(
                    Offering(
                        str(offering["zone"]),
                        str(offering["capacityType"]),
                        float(offering["price"]),
                        bool(offering.get("available", True)),
                        str(offering.get("zoneID") or ""),
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
                {str(k): str(v) for k, v in where.mapping(item.get("labels"), "labels").items()},
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


def plan_document(
    result: SchedulingResult, solve_seconds: float, root_volumes: RootVolumes | None = None
) -> dict[str, Any]:
    """The plan in the JSON/YAML shape (camelCase keys, as Kubernetes does)."""
    volumes = root_volumes or RootVolumes()
    return {
        "nodeClaims": [
            {
                "nodePool": claim.nodepool,
                "instanceType": claim.instance_type,
                "zone": claim.offerings[0].zone,
                "capacityType": claim.offerings[0].capacity_type,
                **(
                    {"capacityReservationId": claim.offerings[0].capacity_reservation_id}
                    if claim.offerings[0].capacity_reservation_id
                    else {}
                ),
                "price": claim.price_per_hour,
                "offeringCount": len(claim.offerings),
                "pods": list(claim.pods),
                **root_volume_entry(claim, volumes),
                **(
                    {
                        "minValuesRelaxed": [
                            {"key": r.key, "minValues": r.written, "relaxedTo": r.relaxed}
                            for r in claim.min_values_relaxed
                        ]
                    }
                    if claim.min_values_relaxed
                    else {}
                ),
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
    lines.extend(
        f"  NodeClaim {number}: minValues for {r['key']} relaxed from {r['minValues']}"
        f" to {r['relaxedTo']} (--min-values-policy BestEffort)"
        for number, claim in enumerate(claims, start=1)
        for r in claim.get("minValuesRelaxed", ())
    )
    lines.extend(
        f"  NodeClaim {number}: root volume {claim['rootVolumeSize']}"
        for number, claim in enumerate(claims, start=1)
        if "rootVolumeSize" in claim
    )
    placements = document["existingNodePlacements"]
    if placements:
        lines.append(f"Pods placed on existing nodes: {sum(len(p['pods']) for p in placements)}")
        lines += [f"  {p['node']}: {', '.join(p['pods'])}" for p in placements]
    unschedulable = document["unschedulable"]
    lines.append(f"Unschedulable pods: {len(unschedulable)}")
    lines += [f"  {u['pod']}: {u['reason']}" for u in unschedulable]
    lines += headroom_lines(document.get("headroom", []))
    lines.append(f"Total hourly cost: ${document['totalHourlyCost']:.4f}")
    lines.append(f"Solve time: {document['solveSeconds']:.3f}s")
    return "\n".join(lines)


_RENDER: dict[OutputFormat, Callable[[dict[str, Any]], str]] = {
    OutputFormat.table: _table,
    OutputFormat.json: lambda d: json.dumps(d, indent=2),
    OutputFormat.yaml: lambda d: yaml.safe_dump(d, sort_keys=False).rstrip(),
}


def build_input(files: list[str], catalog: str | None) -> SchedulingInput:
    """Read manifests and catalog into one solver input, NodeOverlays applied to the catalog
    and the input's reserved capacity offered (raises PlanInputError)."""
    return read_plan_input(files, catalog).problem


@dataclass(frozen=True)
class PlanInput:
    """The solver input, and what `--explain` reports beyond it: the catalog before the
    NodeOverlays and the overlays themselves; and the free instances of each capacity
    reservation the input's EC2NodeClasses list (their status), which the plan hands out."""

    problem: SchedulingInput
    base_catalog: tuple[InstanceType, ...]
    overlays: tuple[NodeOverlay, ...]
    buffers: tuple[CapacityBuffer, ...] = ()
    room: Mapping[str, int] = field(default_factory=dict)
    root_volumes: RootVolumes = field(default_factory=RootVolumes)


def read_plan_input(files: list[str], catalog: str | None) -> PlanInput:
    """`build_input` with the catalog before overlays, the overlays and the reservations' room."""
    manifests = read_manifests(files)
    pending, snapshot = _problem(manifests)
    try:
        volumes = read_root_volumes(
            manifests.node_classes, list(manifests.objects.get(NODE_POOLS, {}).values())
        )
    except InvalidObjectError as error:
        raise PlanInputError(
            f"{manifests.source_of('EC2NodeClass', error.name)}: {error}"
        ) from None
    # A growing root volume is packed at its cap, as the live scheduler's catalog is.
    base = with_cap_ephemeral_storage(load_catalog(catalog), volumes)
    reservations = manifests.reservations
    # Free instances per reservation, less what the input's nodes and NodeClaims hold there.
    room = reservation_room(reservations, snapshot.nodes)
    problem = SchedulingInput(
        pods=tuple(pending),
        nodepools=snapshot.nodepools,
        # Reserved offerings after the overlays: a price overlay does not reprice capacity
        # that is already paid for.
        instance_types=with_reserved_offerings(
            apply_overlays(base, snapshot.overlays), reservations, room=room
        ),
        nodes=snapshot.nodes,
        daemonsets=snapshot.daemonsets,
        namespaces=snapshot.namespaces,
    )
    return PlanInput(problem, base, snapshot.overlays, snapshot.buffers, room, volumes)


def _explain(planned: PlanInput, result: SchedulingResult, pod: str) -> str:
    problem = planned.problem
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
    lines = [f"Pod {key}: {outcome}"]
    if outcome.startswith("placed"):
        # Which preferences the plan gave up to place it (Karpenter's relaxation order).
        relaxed = next((r.preferences for r in result.relaxed if r.pod == key), ())
        lines.append(f"Preferences relaxed: {'; '.join(relaxed) if relaxed else 'none'}")
    lines += _min_values_lines(problem, result, key, outcome)
    lines += [
        f"NodePools ruled out: {explanation.nodepools_ruled_out} of {explanation.nodepools_total}",
        *explanation.lines,
    ]
    claim = next((c for c in result.new_claims if key in c.pods), None)
    lines += explain_root_volume(claim, planned.root_volumes)
    if planned.overlays and claim is not None:
        from daiku_cli.overlays import explain_overlays

        lines += explain_overlays(planned.base_catalog, planned.overlays, claim)
    return "\n".join(lines)


def _min_values_lines(
    problem: SchedulingInput, result: SchedulingResult, key: str, outcome: str
) -> list[str]:
    """What minValues did to the pod: relaxed on its claim (BestEffort), or, under Strict,
    that BestEffort would have relaxed what kept it pending."""
    claim = next((c for c in result.new_claims if key in c.pods), None)
    if claim is not None and claim.min_values_relaxed:
        relaxed = "; ".join(r.describe() for r in claim.min_values_relaxed)
        return [f"MinValues relaxed on its NodeClaim (--min-values-policy BestEffort): {relaxed}"]
    if (
        outcome.startswith("unschedulable")
        and "minValues" in outcome
        and problem.min_values_policy is MinValuesPolicy.STRICT
    ):
        return ["MinValues: --min-values-policy BestEffort would relax them instead"]
    return []


def _check_explained(problem: SchedulingInput, pod: str) -> None:
    key = pod if "/" in pod else f"default/{pod}"
    if all(p.key != key for p in problem.pods):
        raise PlanInputError(f"--explain {pod}: no pending pod {key} in the input")


@app.command(name="plan", cls=DaikuCommand)
def plan(  # noqa: PLR0917 - Typer maps each command-line option to one parameter
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
    allow_unschedulable: Annotated[
        bool,
        typer.Option(
            "--allow-unschedulable",
            help="Exit 0 even when pods stay unschedulable (default: exit 1).",
        ),
    ] = False,
    min_values_policy: Annotated[
        MinValuesPolicy,
        typer.Option(
            "--min-values-policy",
            help=(
                "Strict: pods a NodePool's minValues rules out stay pending; BestEffort: the"
                " claim gets minValues lowered to what the catalog offers (as the scheduler's"
                " flag of the same name)."
            ),
        ),
    ] = MinValuesPolicy.STRICT,
) -> None:
    """Show which NodeClaims daiku would launch for these manifests, and why."""
    with _few_collections():
        _plan(
            filenames,
            catalog,
            output,
            explain,
            allow_unschedulable=allow_unschedulable,
            min_values_policy=min_values_policy,
        )


# Objects a plan allocates before Python's cyclic collector runs (its default is 700). A plan
# builds hundreds of thousands of objects that all live to its end: collecting every 700 found
# nothing and cost a quarter of a 20k-pod plan's CPU (bench.plan_cli). Reference counting
# still frees everything that is not a cycle.
_PLAN_GC_THRESHOLD = 200_000


@contextmanager
def _few_collections() -> Iterator[None]:
    """Run the block with the collector's first threshold at ``_PLAN_GC_THRESHOLD``."""
    before = gc.get_threshold()
    gc.set_threshold(_PLAN_GC_THRESHOLD, *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)


def _plan(
    filenames: list[str],
    catalog: str | None,
    output: OutputFormat,
    explain: str | None,
    *,
    allow_unschedulable: bool,
    min_values_policy: MinValuesPolicy = MinValuesPolicy.STRICT,
) -> None:
    try:
        planned = read_plan_input(filenames, catalog)
        problem, static = plan_static(
            dataclasses.replace(planned.problem, min_values_policy=min_values_policy)
        )
        planned = dataclasses.replace(planned, problem=problem)
        if explain is not None:
            _check_explained(problem, explain)
    except PlanInputError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(exit_codes.BAD_INPUT) from None
    started = time.perf_counter()
    result = with_static_claims(solve(problem), static)
    result, headroom = plan_headroom(problem, result, planned.buffers)
    if planned.room:
        result = dataclasses.replace(
            result, new_claims=assign_reservations(result.new_claims, planned.room)
        )
    solve_seconds = time.perf_counter() - started
    result = with_cap_reasons(result, problem, planned.root_volumes)
    for note in static.notes:
        typer.echo(f"note: {note}", err=True)
    for name, why in overlay_conflicts(planned.base_catalog, planned.overlays).items():
        typer.echo(f"note: NodeOverlay {name} is left out: {why}", err=True)
    if explain is not None:
        typer.echo(_explain(planned, result, explain))
    else:
        document = plan_document(result, solve_seconds, planned.root_volumes)
        if headroom:
            document["headroom"] = headroom
        typer.echo(_RENDER[output](document))
    if result.unschedulable and not allow_unschedulable:
        raise typer.Exit(exit_codes.INCOMPLETE)
