"""Resource types the local apiserver serves: the built-ins daiku and kubectl use, plus CRDs.

A `ResourceType` is what discovery advertises and what the store keys objects by. Built-ins are
listed in `BUILTIN_RESOURCES`; `resource_type_from_crd()` turns an applied
CustomResourceDefinition into one ResourceType per served version.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from localcloud.kube.autoscaling import default_hpa_v2, hpa_v1_to_v2, hpa_v2_to_v1
from localcloud.kube.errors import BadRequest, Invalid
from localcloud.kube.priority import default_priority_class
from localcloud.kube.services import default_service

JsonObject = dict[str, Any]
Defaulter = Callable[[JsonObject], None]
Converter = Callable[[JsonObject], JsonObject]

_ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True, slots=True)
class ResourceType:
    """One (group, version, plural) the server serves, and how the store treats its objects.

    `has_status` means a `/status` subresource: the main endpoint ignores status changes and
    `/status` ignores everything else; `status_on_create` keeps the status a create sends
    (nodes, as kubelets register them) instead of dropping it. `has_generation` means
    metadata.generation is kept and bumped on spec changes. `strategic_patch` is False for
    custom resources (the real apiserver answers 415 to a strategic merge patch on them).
    `storage_key` names a type whose objects this one serves through `to_storage` /
    `from_storage` (events.k8s.io/v1 events are core/v1 events, as in the real apiserver).
    """

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    singular: str = ""
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    has_status: bool = True
    has_scale: bool = False
    # Where the Scale subresource reads and writes (a CRD's specReplicasPath/statusReplicasPath/
    # labelSelectorPath; built-in workloads: spec.replicas, status.replicas, spec.selector).
    scale_spec_path: str = ".spec.replicas"
    scale_status_path: str = ".status.replicas"
    scale_selector_path: str | None = None
    status_on_create: bool = False
    has_generation: bool = True
    strategic_patch: bool = True
    verbs: tuple[str, ...] = _ALL_VERBS
    extra_subresources: tuple[str, ...] = ()
    printer_columns: tuple[JsonObject, ...] = ()
    # a CRD version's openAPIV3Schema: pruning and defaults (see `schema`)
    schema: JsonObject | None = field(default=None, compare=False, hash=False)
    defaulter: Defaulter | None = field(default=None, compare=False)
    # field selector labels beyond metadata.name/metadata.namespace (others are a 400)
    field_labels: tuple[str, ...] = ()
    # another served type whose objects this one shares, with the conversions both ways
    storage_key: str = ""
    to_storage: Converter | None = field(default=None, compare=False)
    from_storage: Converter | None = field(default=None, compare=False)

    # derived names, computed once: the store reads them on every write
    api_version: str = field(init=False, repr=False, compare=False)
    # `v1/pods`, `apps/v1/deployments`: unique among served resources
    key: str = field(init=False, repr=False, compare=False)
    # `pods`, `deployments.apps`: how error messages name the resource
    group_resource: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        api_version = f"{self.group}/{self.version}" if self.group else self.version
        object.__setattr__(self, "api_version", api_version)
        object.__setattr__(self, "key", f"{api_version}/{self.plural}")
        group_resource = f"{self.plural}.{self.group}" if self.group else self.plural
        object.__setattr__(self, "group_resource", group_resource)

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    def check_field_labels(self, labels: tuple[str, ...]) -> None:
        """BadRequest for a field selector label this resource does not support."""
        for label in labels:
            if label not in ("metadata.name", "metadata.namespace", *self.field_labels):
                raise BadRequest(f"field label not supported: {label}")


def _qos_class(pod: JsonObject) -> str:
    containers = (pod.get("spec") or {}).get("containers") or []
    requests_all = True
    any_set = False
    for container in containers:
        resources = container.get("resources") or {}
        requests = resources.get("requests") or {}
        limits = resources.get("limits") or {}
        for name in ("cpu", "memory"):
            request = requests.get(name, limits.get(name))
            if request is not None or name in limits:
                any_set = True
            if name not in limits or request is None or str(request) != str(limits[name]):
                requests_all = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if requests_all else "Burstable"


def _default_pod(pod: JsonObject) -> None:
    spec = pod.setdefault("spec", {})
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("securityContext", {})
    spec.setdefault("priority", 0)
    spec.setdefault("enableServiceLinks", True)
    spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
    tolerations = spec.setdefault("tolerations", [])
    for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"):
        if not any(t.get("key") == key for t in tolerations if isinstance(t, dict)):
            tolerations.append(
                {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
            )
    for container in spec.get("containers") or []:
        container.setdefault("imagePullPolicy", "IfNotPresent")
        container.setdefault("terminationMessagePath", "/dev/termination-log")
        container.setdefault("terminationMessagePolicy", "File")
        container.setdefault("resources", {})
        resources = container["resources"]
        # a limit without a request defaults the request to the limit, as the apiserver does
        for name, limit in (resources.get("limits") or {}).items():
            resources.setdefault("requests", {}).setdefault(name, limit)
    status = pod.setdefault("status", {})
    status.setdefault("phase", "Pending")
    status.setdefault("qosClass", _qos_class(pod))


UNSCHEDULABLE_TAINT_KEY = "node.kubernetes.io/unschedulable"


def _taint_unschedulable_node(node: JsonObject) -> None:
    """A cordoned node (`spec.unschedulable`) carries the `node.kubernetes.io/unschedulable`
    NoSchedule taint and an uncordoned one does not, as the node lifecycle controller keeps it
    (TaintNodesByCondition); localcloud applies it in the same write instead of a moment later."""
    spec = node.setdefault("spec", {})
    taints = [
        t
        for t in spec.get("taints") or []
        if not (isinstance(t, dict) and t.get("key") == UNSCHEDULABLE_TAINT_KEY)
    ]
    if spec.get("unschedulable"):
        taints.append({"key": UNSCHEDULABLE_TAINT_KEY, "effect": "NoSchedule"})
    if taints:
        spec["taints"] = taints
    else:
        spec.pop("taints", None)


def _default_deployment(deployment: JsonObject) -> None:
    spec = deployment.setdefault("spec", {})
    spec.setdefault("replicas", 1)
    # As apps/v1 defaults: the type, then each unset rollingUpdate field, keeping what is given.
    strategy = spec.setdefault("strategy", {})
    strategy.setdefault("type", "RollingUpdate")
    if strategy["type"] == "RollingUpdate":
        rolling = strategy.setdefault("rollingUpdate", {})
        rolling.setdefault("maxUnavailable", "25%")
        rolling.setdefault("maxSurge", "25%")
    spec.setdefault("revisionHistoryLimit", 10)
    spec.setdefault("progressDeadlineSeconds", 600)
    _default_template(spec)


def _default_template(spec: JsonObject) -> None:
    template = spec.get("template")
    if isinstance(template, dict):
        pod_spec = template.setdefault("spec", {})
        pod_spec.setdefault("restartPolicy", "Always")
        pod_spec.setdefault("terminationGracePeriodSeconds", 30)
        pod_spec.setdefault("dnsPolicy", "ClusterFirst")
        pod_spec.setdefault("schedulerName", "default-scheduler")


def _default_replicaset(replicaset: JsonObject) -> None:
    spec = replicaset.setdefault("spec", {})
    spec.setdefault("replicas", 1)
    _default_template(spec)


def _default_daemonset(daemonset: JsonObject) -> None:
    spec = daemonset.setdefault("spec", {})
    if not (spec.get("updateStrategy") or {}).get("type"):
        spec["updateStrategy"] = {
            "type": "RollingUpdate",
            "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0},
        }
    spec.setdefault("revisionHistoryLimit", 10)
    _default_template(spec)


def _default_secret(secret: JsonObject) -> None:
    """Merge `stringData` into `data`, default `type` to Opaque, refuse non-base64 data."""
    secret.setdefault("type", "Opaque")
    data = secret.get("data") or {}
    for key, value in data.items():
        try:
            base64.b64decode(str(value), validate=True)
        except (binascii.Error, ValueError):
            raise BadRequest(
                f'Secret in version "v1" cannot be handled as a Secret: illegal base64 data '
                f"in data[{key}]"
            ) from None
    string_data = secret.pop("stringData", None) or {}
    if string_data:
        secret["data"] = {
            **data,
            **{k: base64.b64encode(str(v).encode()).decode() for k, v in string_data.items()},
        }


def _default_namespace(namespace: JsonObject) -> None:
    namespace.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
    namespace.setdefault("status", {}).setdefault("phase", "Active")
    labels = namespace.setdefault("metadata", {}).setdefault("labels", {})
    labels.setdefault("kubernetes.io/metadata.name", namespace["metadata"].get("name", ""))


def _default_pvc(claim: JsonObject) -> None:
    claim.setdefault("spec", {}).setdefault("volumeMode", "Filesystem")
    claim.setdefault("status", {}).setdefault("phase", "Pending")


def _default_pv(volume: JsonObject) -> None:
    spec = volume.setdefault("spec", {})
    spec.setdefault("persistentVolumeReclaimPolicy", "Retain")
    spec.setdefault("volumeMode", "Filesystem")
    volume.setdefault("status", {}).setdefault("phase", "Available")


def _default_event(event: JsonObject) -> None:
    # core/v1 events carry no status; events.k8s.io/v1 events are the same objects
    event.setdefault("type", "Normal")


# events.k8s.io/v1 field <-> core/v1 field (k8s.io/kubernetes pkg/apis/events/v1 conversion)
_EVENT_FIELDS: tuple[tuple[str, str], ...] = (
    ("regarding", "involvedObject"),
    ("related", "related"),
    ("note", "message"),
    ("reason", "reason"),
    ("type", "type"),
    ("action", "action"),
    ("reportingController", "reportingComponent"),
    ("reportingInstance", "reportingInstance"),
    ("eventTime", "eventTime"),
    ("series", "series"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
)


def event_to_core(event: JsonObject) -> JsonObject:
    """An events.k8s.io/v1 Event as the core/v1 Event it is stored as."""
    core: JsonObject = {"apiVersion": "v1", "kind": "Event", "metadata": event.get("metadata", {})}
    for new, old in _EVENT_FIELDS:
        if new in event:
            core[old] = event[new]
    return core


def event_from_core(core: JsonObject) -> JsonObject:
    """A stored core/v1 Event as events.k8s.io/v1 serves it."""
    event: JsonObject = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": core.get("metadata", {}),
    }
    for new, old in _EVENT_FIELDS:
        if old in core:
            event[new] = core[old]
    return event


_EVENT_FIELD_LABELS: tuple[str, ...] = (
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
    # the events.k8s.io names of the same fields
    "regarding.kind",
    "regarding.namespace",
    "regarding.name",
    "regarding.uid",
    "regarding.apiVersion",
    "reportingController",
)


BUILTIN_RESOURCES: tuple[ResourceType, ...] = (
    ResourceType(
        "",
        "v1",
        "namespaces",
        "Namespace",
        namespaced=False,
        singular="namespace",
        short_names=("ns",),
        field_labels=("status.phase",),
        has_generation=False,
        extra_subresources=("finalize",),
        defaulter=_default_namespace,
    ),
    ResourceType(
        "",
        "v1",
        "pods",
        "Pod",
        namespaced=True,
        singular="pod",
        short_names=("po",),
        categories=("all",),
        field_labels=(
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        ),
        has_generation=False,
        extra_subresources=("binding", "eviction", "log"),
        defaulter=_default_pod,
    ),
    ResourceType(
        "",
        "v1",
        "nodes",
        "Node",
        namespaced=False,
        singular="node",
        short_names=("no",),
        field_labels=("spec.unschedulable",),
        status_on_create=True,
        has_generation=False,
        defaulter=_taint_unschedulable_node,
    ),
    ResourceType(
        "",
        "v1",
        "events",
        "Event",
        namespaced=True,
        singular="event",
        short_names=("ev",),
        has_status=False,
        has_generation=False,
        field_labels=_EVENT_FIELD_LABELS,
        defaulter=_default_event,
    ),
    ResourceType(
        "",
        "v1",
        "persistentvolumeclaims",
        "PersistentVolumeClaim",
        namespaced=True,
        singular="persistentvolumeclaim",
        short_names=("pvc",),
        has_generation=False,
        defaulter=_default_pvc,
    ),
    ResourceType(
        "",
        "v1",
        "persistentvolumes",
        "PersistentVolume",
        namespaced=False,
        singular="persistentvolume",
        short_names=("pv",),
        has_generation=False,
        defaulter=_default_pv,
    ),
    ResourceType(
        "",
        "v1",
        "configmaps",
        "ConfigMap",
        namespaced=True,
        singular="configmap",
        short_names=("cm",),
        has_status=False,
        has_generation=False,
    ),
    ResourceType(
        "",
        "v1",
        "secrets",
        "Secret",
        namespaced=True,
        singular="secret",
        field_labels=("type",),
        has_status=False,
        has_generation=False,
        defaulter=_default_secret,
    ),
    ResourceType(
        "",
        "v1",
        "serviceaccounts",
        "ServiceAccount",
        namespaced=True,
        singular="serviceaccount",
        short_names=("sa",),
        has_status=False,
        has_generation=False,
        extra_subresources=("token",),
    ),
    ResourceType(
        "",
        "v1",
        "services",
        "Service",
        namespaced=True,
        singular="service",
        short_names=("svc",),
        categories=("all",),
        has_generation=False,
        defaulter=default_service,
    ),
    ResourceType(
        "events.k8s.io",
        "v1",
        "events",
        "Event",
        namespaced=True,
        singular="event",
        short_names=("ev",),
        has_status=False,
        has_generation=False,
        field_labels=_EVENT_FIELD_LABELS,
        storage_key="v1/events",
        to_storage=event_to_core,
        from_storage=event_from_core,
    ),
    ResourceType(
        "coordination.k8s.io",
        "v1",
        "leases",
        "Lease",
        namespaced=True,
        singular="lease",
        has_status=False,
        has_generation=False,
    ),
    ResourceType(
        "apps",
        "v1",
        "deployments",
        "Deployment",
        namespaced=True,
        singular="deployment",
        short_names=("deploy",),
        categories=("all",),
        has_scale=True,
        defaulter=_default_deployment,
    ),
    ResourceType(
        "apps",
        "v1",
        "replicasets",
        "ReplicaSet",
        namespaced=True,
        singular="replicaset",
        short_names=("rs",),
        categories=("all",),
        field_labels=("status.replicas",),
        has_scale=True,
        defaulter=_default_replicaset,
    ),
    ResourceType(
        "apps",
        "v1",
        "daemonsets",
        "DaemonSet",
        namespaced=True,
        singular="daemonset",
        short_names=("ds",),
        categories=("all",),
        defaulter=_default_daemonset,
    ),
    ResourceType(
        "policy",
        "v1",
        "poddisruptionbudgets",
        "PodDisruptionBudget",
        namespaced=True,
        singular="poddisruptionbudget",
        short_names=("pdb",),
    ),
    ResourceType(
        "apps",
        "v1",
        "statefulsets",
        "StatefulSet",
        namespaced=True,
        singular="statefulset",
        short_names=("sts",),
        categories=("all",),
        has_scale=True,
    ),
    ResourceType(
        "batch",
        "v1",
        "jobs",
        "Job",
        namespaced=True,
        singular="job",
        categories=("all",),
    ),
    ResourceType(
        "batch",
        "v1",
        "cronjobs",
        "CronJob",
        namespaced=True,
        singular="cronjob",
        short_names=("cj",),
        categories=("all",),
    ),
    ResourceType(
        "autoscaling",
        "v2",
        "horizontalpodautoscalers",
        "HorizontalPodAutoscaler",
        namespaced=True,
        singular="horizontalpodautoscaler",
        short_names=("hpa",),
        categories=("all",),
        defaulter=default_hpa_v2,
    ),
    ResourceType(  # what `kubectl autoscale` writes, served from the v2 objects
        "autoscaling",
        "v1",
        "horizontalpodautoscalers",
        "HorizontalPodAutoscaler",
        namespaced=True,
        singular="horizontalpodautoscaler",
        short_names=("hpa",),
        categories=("all",),
        storage_key="autoscaling/v2/horizontalpodautoscalers",
        to_storage=hpa_v1_to_v2,
        from_storage=hpa_v2_to_v1,
    ),
    ResourceType(
        "networking.k8s.io",
        "v1",
        "networkpolicies",
        "NetworkPolicy",
        namespaced=True,
        singular="networkpolicy",
        short_names=("netpol",),
        has_status=False,
    ),
    ResourceType(
        "networking.k8s.io",
        "v1",
        "ingresses",
        "Ingress",
        namespaced=True,
        singular="ingress",
        short_names=("ing",),
    ),
    *(
        ResourceType(
            "rbac.authorization.k8s.io",
            "v1",
            plural,
            kind,
            namespaced=namespaced,
            singular=kind.lower(),
            has_status=False,
            has_generation=False,
        )
        for plural, kind, namespaced in (
            ("roles", "Role", True),
            ("rolebindings", "RoleBinding", True),
            ("clusterroles", "ClusterRole", False),
            ("clusterrolebindings", "ClusterRoleBinding", False),
        )
    ),
    ResourceType(
        "scheduling.k8s.io",
        "v1",
        "priorityclasses",
        "PriorityClass",
        namespaced=False,
        singular="priorityclass",
        short_names=("pc",),
        has_status=False,
        has_generation=False,
        defaulter=default_priority_class,
    ),
    *(
        # who the token is: `kubectl auth whoami` and kr8s's whoami (TokenReview)
        ResourceType(
            "authentication.k8s.io",
            "v1",
            plural,
            kind,
            namespaced=False,
            singular=kind.lower(),
            has_status=False,
            has_generation=False,
            verbs=("create",),
        )
        for plural, kind in (
            ("selfsubjectreviews", "SelfSubjectReview"),
            ("tokenreviews", "TokenReview"),
        )
    ),
    ResourceType(
        "authorization.k8s.io",
        "v1",
        "selfsubjectaccessreviews",
        "SelfSubjectAccessReview",
        namespaced=False,
        singular="selfsubjectaccessreview",
        has_status=False,
        has_generation=False,
        verbs=("create",),
    ),
    ResourceType(
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        namespaced=False,
        singular="customresourcedefinition",
        short_names=("crd", "crds"),
    ),
)


def resource_types_from_crd(crd: JsonObject) -> list[ResourceType]:
    """One ResourceType per served version of an apiextensions.k8s.io/v1 CRD.

    Raises Invalid naming the missing field when the CRD lacks group, names.plural, names.kind
    or scope.
    """
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    name = (crd.get("metadata") or {}).get("name", "")
    for required, value in (
        ("spec.group", spec.get("group")),
        ("spec.names.plural", names.get("plural")),
        ("spec.names.kind", names.get("kind")),
        ("spec.scope", spec.get("scope")),
    ):
        if not value:
            raise Invalid(
                f'CustomResourceDefinition.apiextensions.k8s.io "{name}" is invalid: '
                f"{required}: Required value",
                kind="CustomResourceDefinition",
                name=name,
                group="apiextensions.k8s.io",
            )
    if spec["scope"] not in ("Namespaced", "Cluster"):
        raise Invalid(f"CustomResourceDefinition {name}: spec.scope must be Namespaced or Cluster")
    types = []
    for version in spec.get("versions") or []:
        if not version.get("served", True):
            continue
        subresources = version.get("subresources") or {}
        types.append(
            ResourceType(
                group=str(spec["group"]),
                version=str(version.get("name")),
                plural=str(names["plural"]),
                kind=str(names["kind"]),
                namespaced=spec["scope"] == "Namespaced",
                singular=str(names.get("singular") or str(names["kind"]).lower()),
                short_names=tuple(names.get("shortNames") or ()),
                categories=tuple(names.get("categories") or ()),
                has_status="status" in subresources,
                has_scale="scale" in subresources,
                **_scale_paths(subresources.get("scale")),
                has_generation=True,
                strategic_patch=False,
                printer_columns=tuple(version.get("additionalPrinterColumns") or ()),
                schema=(version.get("schema") or {}).get("openAPIV3Schema"),
                field_labels=tuple(
                    str(f.get("jsonPath", "")).lstrip(".")
                    for f in version.get("selectableFields") or []
                ),
            )
        )
    return types


def _scale_paths(scale: object) -> dict[str, Any]:
    """A CRD version's scale subresource paths as ResourceType fields (none: the defaults)."""
    if not isinstance(scale, dict):
        return {}
    paths: dict[str, Any] = {
        "scale_spec_path": str(scale.get("specReplicasPath") or ".spec.replicas"),
        "scale_status_path": str(scale.get("statusReplicasPath") or ".status.replicas"),
    }
    if scale.get("labelSelectorPath"):
        paths["scale_selector_path"] = str(scale["labelSelectorPath"])
    return paths
