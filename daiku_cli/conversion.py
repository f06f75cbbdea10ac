"""Convert Karpenter objects into daiku's (`daiku convert`). Pure: no I/O, no clock.

Accepted inputs (one YAML/JSON document each):
- karpenter.sh/v1 NodePool, karpenter.k8s.aws/v1 EC2NodeClass: same fields, new apiVersion;
- karpenter.sh/v1beta1 NodePool, karpenter.k8s.aws/v1beta1 EC2NodeClass;
- karpenter.sh/v1alpha1 NodeOverlay: same fields, daiku.dev/v1alpha1;
- autoscaling.x-k8s.io/v1alpha1 CapacityBuffer (what Karpenter v1.14 reads): daiku.dev/v1alpha1
  CapacityBuffer, see `daiku_cli.conversion_buffers`;
- karpenter.sh/v1alpha5 Provisioner (inline `provider` or `providerRef`) and
  karpenter.k8s.aws/v1alpha1 AWSNodeTemplate, as in Karpenter before v0.32.

Every field that cannot be carried over becomes a `ConversionWarning` naming the object and the
field; the conversion goes on without it. Input that cannot be read at all (a document that is
not a mapping, a requirement without a key, a non-integer TTL) raises `ConversionError`, which
also names the object and the field.

Semantics kept from Karpenter's own v1alpha5 → v1 migration:
- `ttlSecondsAfterEmpty: N` → `consolidationPolicy: WhenEmpty`, `consolidateAfter: Ns`;
- `consolidation.enabled: true` → `WhenEmptyOrUnderutilized`, `consolidateAfter: 0s`;
- neither → `WhenEmpty` with `consolidateAfter: Never` (v1alpha5 did not remove empty nodes);
- `ttlSecondsUntilExpired: N` → `expireAfter: N` as a duration, absent → `Never`;
- requirements the v1alpha5 webhook defaulted (capacity type on-demand, arch amd64) are written
  out explicitly, because daiku's defaults are Karpenter v1's;
- `kubeletConfiguration` moves from the Provisioner to its EC2NodeClass `spec.kubelet`.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from daiku_cli.conversion_buffers import UPSTREAM_API_VERSION, capacity_buffer, fill_requests
from scheduler_svc.core.requirements import Operator

DAIKU_API_VERSION = "daiku.dev/v1"
DAIKU_GROUP = "daiku.dev"
DAIKU_OVERLAY_API_VERSION = "daiku.dev/v1alpha1"

# Written into generated EC2NodeClasses when the input does not say; a warning asks to replace it.
CLUSTER_NAME_PLACEHOLDER = "CLUSTER_NAME"

# metadata the API server owns; never copied.
_SERVER_METADATA = frozenset(
    {"uid", "resourceVersion", "generation", "creationTimestamp", "managedFields", "selfLink"}
)
_LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"

_NODEPOOL_SPEC_FIELDS = frozenset({"template", "disruption", "limits", "weight", "replicas"})
_TEMPLATE_FIELDS = frozenset({"metadata", "spec"})
_TEMPLATE_METADATA_FIELDS = frozenset({"labels", "annotations"})
_TEMPLATE_SPEC_FIELDS = frozenset(
    {
        "nodeClassRef",
        "requirements",
        "taints",
        "startupTaints",
        "expireAfter",
        "terminationGracePeriod",
    }
)
_NODEOVERLAY_SPEC_FIELDS = frozenset(
    {"requirements", "price", "priceAdjustment", "capacity", "weight"}
)
_DISRUPTION_FIELDS = frozenset(
    {"consolidationPolicy", "consolidateAfter", "budgets", "consolidationThreshold"}
)
_EC2NODECLASS_SPEC_FIELDS = frozenset(
    {
        "subnetSelectorTerms",
        "securityGroupSelectorTerms",
        "amiSelectorTerms",
        "amiFamily",
        "role",
        "instanceProfile",
        "tags",
        "userData",
        "associatePublicIPAddress",
        "detailedMonitoring",
        "instanceStorePolicy",
        "context",
        "blockDeviceMappings",
        "metadataOptions",
        "kubelet",
        "capacityReservationSelectorTerms",
    }
)
_KUBELET_FIELDS = frozenset(
    {
        "clusterDNS",
        "maxPods",
        "podsPerCore",
        "systemReserved",
        "kubeReserved",
        "evictionHard",
        "evictionSoft",
        "evictionSoftGracePeriod",
        "evictionMaxPodGracePeriod",
        "imageGCHighThresholdPercent",
        "imageGCLowThresholdPercent",
        "cpuCFSQuota",
    }
)
# Labels/requirement keys daiku sets itself (the CRDs refuse them).
# Node affinity's operators plus Karpenter's Gte and Lte, spelled as the API spells them.
_OPERATORS = tuple(operator.value for operator in Operator)

_RESERVED_LABELS = frozenset(
    {
        "kubernetes.io/hostname",
        "karpenter.sh/nodepool",
        "karpenter.sh/provisioner-name",
        "daiku.dev/nodepool",
    }
)
_RESERVED_TAG_PREFIXES = ("daiku.dev/", "kubernetes.io/cluster/")
_RESERVED_TAGS = frozenset(
    {
        "karpenter.sh/nodepool",
        "karpenter.sh/nodeclaim",
        "karpenter.sh/provisioner-name",
        "karpenter.k8s.aws/ec2nodeclass",
        "eks:eks-cluster-name",
    }
)
_ALIAS_FAMILIES = {
    "AL2": "al2",
    "AL2023": "al2023",
    "Bottlerocket": "bottlerocket",
    "Windows2019": "windows2019",
    "Windows2022": "windows2022",
}


class ConversionError(ValueError):
    """The input cannot be converted; the message names the object and the field."""


@dataclass(frozen=True)
class ConversionWarning:
    """A field of `object_ref` (Kind/name) that the converted object does not carry, and why."""

    object_ref: str
    field_path: str
    message: str

    def __str__(self) -> str:
        return f"{self.object_ref}: {self.field_path}: {self.message}"


@dataclass(frozen=True)
class ConversionResult:
    """The daiku objects, in input order, and every warning raised while converting."""

    objects: tuple[dict[str, Any], ...]
    warnings: tuple[ConversionWarning, ...]


@dataclass
class _Converter:
    cluster_name: str | None
    warnings: list[ConversionWarning] = field(default_factory=list)
    # Provisioners' kubeletConfiguration waiting for the AWSNodeTemplate they reference.
    pending_kubelet: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)
    # CapacityBuffers waiting for their PodTemplate (namespace, name), by buffer name.
    pending_templates: dict[str, tuple[str, str]] = field(default_factory=dict)

    def warn(self, ref: str, field_path: str, message: str) -> None:
        self.warnings.append(ConversionWarning(ref, field_path, message))

    @property
    def cluster(self) -> str:
        return self.cluster_name or CLUSTER_NAME_PLACEHOLDER

    # --- dispatch -------------------------------------------------------------------------

    def convert(self, index: int, document: Any) -> list[dict[str, Any]]:
        if document is None:
            return []
        if not isinstance(document, Mapping):
            raise ConversionError(f"document {index}: expected a mapping, got {type(document)}")
        api_version = str(document.get("apiVersion", ""))
        kind = str(document.get("kind", ""))
        ref = f"{kind or '<no kind>'}/{_name(document, index)}"
        group = api_version.split("/", 1)[0]
        is_karpenter = group in ("karpenter.sh", "karpenter.k8s.aws", DAIKU_GROUP)
        metadata = document.get("metadata")
        if is_karpenter and not (isinstance(metadata, Mapping) and metadata.get("name")):
            raise ConversionError(f"{ref}: metadata.name: missing")
        handler = _HANDLERS.get((api_version, kind))
        if handler is not None:
            return handler(self, document, ref)
        if is_karpenter:
            self.warn(ref, "apiVersion", f"{api_version} {kind} is not convertible; skipped")
            return []
        self.warn(ref, "apiVersion", f"not a Karpenter object ({api_version}); passed unchanged")
        return [copy.deepcopy(dict(document))]

    # --- Karpenter v1 / v1beta1 -----------------------------------------------------------

    def nodepool_v1(self, document: Mapping[str, Any], ref: str) -> dict[str, Any]:
        spec = _mapping(document.get("spec", {}), ref, "spec")
        out_spec = self.keep(spec, _NODEPOOL_SPEC_FIELDS, ref, "spec")
        template = self.keep(
            _mapping(spec.get("template", {}), ref, "spec.template"),
            _TEMPLATE_FIELDS,
            ref,
            "spec.template",
        )
        if "metadata" in template:
            template["metadata"] = self.template_metadata(
                _mapping(template["metadata"], ref, "spec.template.metadata"), ref
            )
        template_spec = self.keep(
            _mapping(template.get("spec", {}), ref, "spec.template.spec"),
            _TEMPLATE_SPEC_FIELDS,
            ref,
            "spec.template.spec",
        )
        node_class_ref = _mapping(
            template_spec.get("nodeClassRef", {}), ref, "spec.template.spec.nodeClassRef"
        )
        template_spec["nodeClassRef"] = {
            "group": DAIKU_GROUP,
            "kind": "EC2NodeClass",
            "name": str(node_class_ref.get("name", "default")),
        }
        template_spec["requirements"] = self.requirements(
            template_spec.get("requirements", []), ref, "spec.template.spec.requirements"
        )
        template["spec"] = template_spec
        out_spec["template"] = template
        if "disruption" in out_spec:
            out_spec["disruption"] = self.keep(
                _mapping(out_spec["disruption"], ref, "spec.disruption"),
                _DISRUPTION_FIELDS,
                ref,
                "spec.disruption",
            )
        return _daiku_object("NodePool", document, out_spec)

    def nodepool_v1beta1(self, document: Mapping[str, Any], ref: str) -> dict[str, Any]:
        v1 = copy.deepcopy(dict(document))
        spec = _dict(v1.setdefault("spec", {}), ref, "spec")
        template_spec = _dict(
            _dict(spec.setdefault("template", {}), ref, "spec.template").setdefault("spec", {}),
            ref,
            "spec.template.spec",
        )
        disruption = _dict(spec.get("disruption", {}), ref, "spec.disruption")
        if "expireAfter" in disruption:
            template_spec["expireAfter"] = disruption.pop("expireAfter")
        if disruption.get("consolidationPolicy") == "WhenUnderutilized":
            disruption["consolidationPolicy"] = "WhenEmptyOrUnderutilized"
            disruption.setdefault("consolidateAfter", "0s")
        if "kubelet" in template_spec:
            template_spec.pop("kubelet")
            self.warn(
                ref,
                "spec.template.spec.kubelet",
                "kubelet settings belong to the EC2NodeClass in v1; move them to its spec.kubelet",
            )
        old_ref = template_spec.get("nodeClassRef")
        if isinstance(old_ref, Mapping):
            template_spec["nodeClassRef"] = {"name": old_ref.get("name", "default")}
        return self.nodepool_v1(v1, ref)

    def ec2nodeclass_v1(self, document: Mapping[str, Any], ref: str) -> dict[str, Any]:
        spec = self.keep(
            _mapping(document.get("spec", {}), ref, "spec"), _EC2NODECLASS_SPEC_FIELDS, ref, "spec"
        )
        if document.get("apiVersion") == "karpenter.k8s.aws/v1beta1" and (
            "amiSelectorTerms" not in spec
        ):
            # v1beta1 picked the latest EKS AMI of the family when no term was given.
            self.default_ami_terms(spec, ref)
        if "tags" in spec:
            spec["tags"] = self.tags(_mapping(spec["tags"], ref, "spec.tags"), ref)
        if "kubelet" in spec:
            spec["kubelet"] = self.keep(
                _mapping(spec["kubelet"], ref, "spec.kubelet"), _KUBELET_FIELDS, ref, "spec.kubelet"
            )
        return _daiku_object("EC2NodeClass", document, spec)

    # --- Karpenter v1alpha5 ---------------------------------------------------------------

    def provisioner(self, document: Mapping[str, Any], ref: str) -> list[dict[str, Any]]:
        spec = dict(_mapping(document.get("spec", {}), ref, "spec"))
        template_metadata = self.provisioner_template_metadata(spec, ref)
        template_spec = self.provisioner_template_spec(spec, ref)
        nodepool_spec: dict[str, Any] = {"disruption": self.provisioner_disruption(spec, ref)}
        if "limits" in spec:
            limits = _mapping(spec.pop("limits"), ref, "spec.limits")
            nodepool_spec["limits"] = copy.deepcopy(dict(limits.get("resources", {})))
            for extra in sorted(set(limits) - {"resources"}):
                self.warn(ref, f"spec.limits.{extra}", "no daiku equivalent; dropped")
        if "weight" in spec:
            nodepool_spec["weight"] = spec.pop("weight")
        node_class_name, node_classes = self.provisioner_node_class(document, spec, ref)
        node_class_ref = {"group": DAIKU_GROUP, "kind": "EC2NodeClass", "name": node_class_name}
        template_spec = {"nodeClassRef": node_class_ref, **template_spec}
        template: dict[str, Any] = {"spec": template_spec}
        if template_metadata:
            template = {"metadata": template_metadata, "spec": template_spec}
        for leftover in sorted(spec):
            self.warn(ref, f"spec.{leftover}", "no daiku equivalent; dropped")
        nodepool = _daiku_object("NodePool", document, {"template": template, **nodepool_spec})
        return [nodepool, *node_classes]

    def provisioner_template_metadata(self, spec: dict[str, Any], ref: str) -> dict[str, Any]:
        """labels and annotations of the Provisioner's nodes (popped from `spec`)."""
        metadata: dict[str, Any] = {}
        if "labels" in spec:
            metadata["labels"] = self.labels(
                _mapping(spec.pop("labels"), ref, "spec.labels"), ref, "spec.labels"
            )
        if "annotations" in spec:
            metadata["annotations"] = {
                str(k): str(v)
                for k, v in _mapping(spec.pop("annotations"), ref, "spec.annotations").items()
            }
        return metadata

    def provisioner_template_spec(self, spec: dict[str, Any], ref: str) -> dict[str, Any]:
        """requirements, taints and expiry of the Provisioner's nodes (popped from `spec`)."""
        requirements = self.requirements(spec.pop("requirements", []), ref, "spec.requirements")
        keys = {r["key"] for r in requirements}
        # v1alpha5's webhook defaulted these; daiku's defaults are v1's, so say them out loud.
        if "karpenter.sh/capacity-type" not in keys:
            requirements.append(
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}
            )
        if "kubernetes.io/arch" not in keys:
            requirements.append(
                {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}
            )
        template_spec: dict[str, Any] = {"requirements": requirements}
        for taint_field in ("taints", "startupTaints"):
            if taint_field in spec:
                template_spec[taint_field] = copy.deepcopy(spec.pop(taint_field))
        ttl_expired = spec.pop("ttlSecondsUntilExpired", None)
        template_spec["expireAfter"] = (
            "Never"
            if ttl_expired is None
            else duration_from_seconds(_seconds(ttl_expired, ref, "spec.ttlSecondsUntilExpired"))
        )
        return template_spec

    def provisioner_disruption(self, spec: dict[str, Any], ref: str) -> dict[str, Any]:
        """The NodePool disruption block from ttlSecondsAfterEmpty / consolidation (popped)."""
        ttl_empty = spec.pop("ttlSecondsAfterEmpty", None)
        consolidation = _mapping(spec.pop("consolidation", {}) or {}, ref, "spec.consolidation")
        if consolidation.get("enabled") is True:
            if ttl_empty is not None:
                self.warn(
                    ref,
                    "spec.ttlSecondsAfterEmpty",
                    "ignored: consolidation.enabled already removes empty nodes",
                )
            return {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s"}
        if ttl_empty is not None:
            seconds = _seconds(ttl_empty, ref, "spec.ttlSecondsAfterEmpty")
            return {
                "consolidationPolicy": "WhenEmpty",
                "consolidateAfter": duration_from_seconds(seconds),
            }
        return {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "Never"}

    def provisioner_node_class(
        self, document: Mapping[str, Any], spec: dict[str, Any], ref: str
    ) -> tuple[str, list[dict[str, Any]]]:
        """The EC2NodeClass name the NodePool references, and the EC2NodeClass generated from
        an inline `provider` (none for `providerRef`). Pops provider, providerRef and
        kubeletConfiguration from `spec`."""
        name = _name(document, 0)
        kubelet = spec.pop("kubeletConfiguration", None)
        kubelet_settings = (
            self.keep(
                _mapping(kubelet, ref, "spec.kubeletConfiguration"),
                _KUBELET_FIELDS,
                ref,
                "spec.kubeletConfiguration",
            )
            if kubelet is not None
            else {}
        )
        provider = spec.pop("provider", None)
        provider_ref = spec.pop("providerRef", None)
        if provider is not None:
            if provider_ref is not None:
                self.warn(ref, "spec.providerRef", "ignored: spec.provider is also set")
            node_class = self.node_class_from_v1alpha(
                _mapping(provider, ref, "spec.provider"),
                f"EC2NodeClass/{name}",
                ref,
                "spec.provider",
            )
            if kubelet_settings:
                node_class["kubelet"] = kubelet_settings
            generated = {
                "apiVersion": DAIKU_API_VERSION,
                "kind": "EC2NodeClass",
                "metadata": {"name": name},
                "spec": node_class,
            }
            return name, [generated]
        if provider_ref is not None:
            node_class_name = str(_mapping(provider_ref, ref, "spec.providerRef").get("name", ""))
            if not node_class_name:
                raise ConversionError(f"{ref}: spec.providerRef.name: missing")
            if kubelet_settings:
                self.pending_kubelet[node_class_name] = (ref, kubelet_settings)
            return node_class_name, []
        self.warn(
            ref,
            "spec.provider",
            "neither provider nor providerRef is set; nodeClassRef points at EC2NodeClass "
            "'default'",
        )
        if kubelet_settings:
            self.pending_kubelet["default"] = (ref, kubelet_settings)
        return "default", []

    def awsnodetemplate(self, document: Mapping[str, Any], ref: str) -> dict[str, Any]:
        spec = _mapping(document.get("spec", {}), ref, "spec")
        name = _name(document, 0)
        node_class = self.node_class_from_v1alpha(spec, f"EC2NodeClass/{name}", ref, "spec")
        return _daiku_object("EC2NodeClass", document, node_class)

    def node_class_from_v1alpha(
        self, provider: Mapping[str, Any], out_ref: str, ref: str, path: str
    ) -> dict[str, Any]:
        """An EC2NodeClass spec from a v1alpha5 inline provider or a v1alpha1 AWSNodeTemplate."""
        source = dict(provider)
        spec: dict[str, Any] = {}
        for selector_field, terms_field, what in (
            ("subnetSelector", "subnetSelectorTerms", "subnets"),
            ("securityGroupSelector", "securityGroupSelectorTerms", "security groups"),
        ):
            if selector_field in source:
                spec[terms_field] = self.selector_terms(
                    _mapping(source.pop(selector_field), ref, f"{path}.{selector_field}")
                )
            else:
                spec[terms_field] = [{"tags": {"karpenter.sh/discovery": self.cluster}}]
                self.warn(
                    ref,
                    f"{path}.{selector_field}",
                    f"missing; {out_ref} selects {what} tagged "
                    f"karpenter.sh/discovery={self.cluster}",
                )
        family = str(source.pop("amiFamily", "AL2"))
        if "amiSelector" in source:
            spec["amiSelectorTerms"] = self.ami_terms(
                _mapping(source.pop("amiSelector"), ref, f"{path}.amiSelector")
            )
            spec["amiFamily"] = family if family in _ALIAS_FAMILIES else "Custom"
        else:
            spec["amiFamily"] = family
            self.default_ami_terms(spec, ref)
        if "instanceProfile" in source:
            spec["instanceProfile"] = str(source.pop("instanceProfile"))
        else:
            spec["role"] = f"KarpenterNodeRole-{self.cluster}"
            self.warn(
                ref,
                f"{path}.instanceProfile",
                f"missing (v1alpha5 used the global default instance profile); {out_ref} uses "
                f"role KarpenterNodeRole-{self.cluster}: set spec.role to your node role",
            )
        if "tags" in source:
            spec["tags"] = self.tags(_mapping(source.pop("tags"), ref, f"{path}.tags"), ref)
        for same in ("userData", "blockDeviceMappings", "metadataOptions", "detailedMonitoring"):
            if same in source:
                spec[same] = copy.deepcopy(source.pop(same))
        if "context" in source:
            spec["context"] = str(source.pop("context"))
        for leftover in sorted(source):
            self.warn(ref, f"{path}.{leftover}", "no daiku equivalent; dropped")
        return spec

    def selector_terms(self, selector: Mapping[str, Any]) -> list[dict[str, Any]]:
        """v1alpha5 selector maps: `aws-ids`/`aws::ids` list ids (one term each), else tags."""
        ids: list[str] = []
        tags: dict[str, str] = {}
        for key, value in selector.items():
            if key in ("aws-ids", "aws::ids"):
                ids.extend(part.strip() for part in str(value).split(",") if part.strip())
            else:
                tags[str(key)] = str(value)
        terms: list[dict[str, Any]] = [{"id": i} for i in ids]
        if tags:
            terms.append({"tags": tags})
        return terms

    def ami_terms(self, selector: Mapping[str, Any]) -> list[dict[str, Any]]:
        """v1alpha5 amiSelector: `aws::ids`/`aws-ids`, `aws::name`, `aws::owners`, else tags."""
        ids: list[str] = []
        term: dict[str, Any] = {}
        tags: dict[str, str] = {}
        for key, value in selector.items():
            if key in ("aws-ids", "aws::ids"):
                ids.extend(part.strip() for part in str(value).split(",") if part.strip())
            elif key == "aws::name":
                term["name"] = str(value)
            elif key == "aws::owners":
                term["owner"] = str(value)
            else:
                tags[str(key)] = str(value)
        if tags:
            term["tags"] = tags
        terms: list[dict[str, Any]] = [{"id": i} for i in ids]
        if term:
            terms.append(term)
        return terms

    def default_ami_terms(self, spec: dict[str, Any], ref: str) -> None:
        family = str(spec.get("amiFamily", "AL2"))
        alias = _ALIAS_FAMILIES.get(family)
        if alias is None:
            self.warn(
                ref,
                "amiFamily",
                f"{family} has no EKS-optimized AMI alias; using al2023@latest — set "
                "amiSelectorTerms for your own AMIs",
            )
            spec["amiFamily"] = "AL2023"
            alias = "al2023"
        spec["amiSelectorTerms"] = [{"alias": f"{alias}@latest"}]

    # --- field-level conversions ----------------------------------------------------------

    def keep(
        self, source: Mapping[str, Any], known: frozenset[str], ref: str, path: str
    ) -> dict[str, Any]:
        """A deep copy of `source` without the fields daiku does not know (each one warned)."""
        out: dict[str, Any] = {}
        for key, value in source.items():
            if key in known:
                out[key] = copy.deepcopy(value)
            else:
                self.warn(ref, f"{path}.{key}", "no daiku equivalent; dropped")
        return out

    def template_metadata(self, metadata: Mapping[str, Any], ref: str) -> dict[str, Any]:
        out = self.keep(metadata, _TEMPLATE_METADATA_FIELDS, ref, "spec.template.metadata")
        if "labels" in out:
            out["labels"] = self.labels(
                _mapping(out["labels"], ref, "spec.template.metadata.labels"),
                ref,
                "spec.template.metadata.labels",
            )
        return out

    def labels(self, labels: Mapping[str, Any], ref: str, path: str) -> dict[str, str]:
        out: dict[str, str] = {}
        for key, value in labels.items():
            if key in _RESERVED_LABELS:
                self.warn(ref, f"{path}[{key}]", "set by daiku itself; dropped")
            else:
                out[str(key)] = str(value)
        return out

    def tags(self, tags: Mapping[str, Any], ref: str) -> dict[str, str]:
        out: dict[str, str] = {}
        for key, value in tags.items():
            if key in _RESERVED_TAGS or str(key).startswith(_RESERVED_TAG_PREFIXES):
                self.warn(ref, f"spec.tags[{key}]", "set by daiku itself; dropped")
            else:
                out[str(key)] = str(value)
        return out

    def requirements(
        self, source: Any, ref: str, path: str, *, drop_reserved: bool = True
    ) -> list[dict[str, Any]]:
        if not isinstance(source, list):
            raise ConversionError(f"{ref}: {path}: expected a list")
        out: list[dict[str, Any]] = []
        for index, item in enumerate(source):
            item_path = f"{path}[{index}]"
            requirement = _mapping(item, ref, item_path)
            if "key" not in requirement or "operator" not in requirement:
                raise ConversionError(f"{ref}: {item_path}: key and operator are required")
            key = str(requirement["key"])
            if key in _RESERVED_LABELS and drop_reserved:
                self.warn(ref, f"{item_path}.key", f"{key} is set by daiku itself; dropped")
                continue
            operator = str(requirement["operator"])
            if operator not in _OPERATORS:
                # Kept as written (dropping it would widen the NodePool); daiku refuses it.
                self.warn(
                    ref,
                    f"{item_path}.operator",
                    f"unknown operator {operator!r} (expected one of {', '.join(_OPERATORS)}); "
                    "kept as written, daiku will refuse it until it is fixed",
                )
            converted: dict[str, Any] = {"key": key, "operator": operator}
            if "values" in requirement:
                values = requirement["values"]
                if not isinstance(values, list):
                    raise ConversionError(f"{ref}: {item_path}.values: expected a list")
                converted["values"] = [str(v) for v in values]
            if "minValues" in requirement:
                converted["minValues"] = requirement["minValues"]
            for extra in sorted(set(requirement) - {"key", "operator", "values", "minValues"}):
                self.warn(ref, f"{item_path}.{extra}", "no daiku equivalent; dropped")
            out.append(converted)
        return out

    def nodeoverlay_v1alpha1(self, document: Mapping[str, Any], ref: str) -> dict[str, Any]:
        """karpenter.sh/v1alpha1 NodeOverlay: the same fields under daiku.dev/v1alpha1."""
        spec = self.keep(
            _mapping(document.get("spec", {}), ref, "spec"), _NODEOVERLAY_SPEC_FIELDS, ref, "spec"
        )
        if "requirements" in spec:
            # Kept whole, NodePool keys too: dropping one would widen the overlay. daiku's
            # instance types carry no NodePool label, so such a requirement matches nothing.
            spec["requirements"] = self.requirements(
                spec["requirements"], ref, "spec.requirements", drop_reserved=False
            )
            for i, requirement in enumerate(spec["requirements"]):
                if requirement["key"] in _RESERVED_LABELS:
                    self.warn(
                        ref,
                        f"spec.requirements[{i}].key",
                        f"daiku applies overlays per instance type, not per NodePool: "
                        f"{requirement['key']} matches no instance type",
                    )
        converted = _daiku_object("NodeOverlay", document, spec)
        converted["apiVersion"] = DAIKU_OVERLAY_API_VERSION
        return converted

    def attach_pending_kubelet(self, objects: list[dict[str, Any]]) -> None:
        """Move Provisioners' kubeletConfiguration onto the EC2NodeClass they reference."""
        by_name = {
            o["metadata"]["name"]: o
            for o in objects
            if o.get("apiVersion") == DAIKU_API_VERSION and o.get("kind") == "EC2NodeClass"
        }
        for node_class_name, (ref, kubelet) in self.pending_kubelet.items():
            node_class = by_name.get(node_class_name)
            if node_class is None:
                self.warn(
                    ref,
                    "spec.kubeletConfiguration",
                    f"EC2NodeClass {node_class_name} is not in the input; add these settings to "
                    "its spec.kubelet",
                )
            elif node_class["spec"].get("kubelet", kubelet) != kubelet:
                self.warn(
                    ref,
                    "spec.kubeletConfiguration",
                    f"EC2NodeClass {node_class_name} already has other kubelet settings; kept "
                    "those",
                )
            else:
                node_class["spec"]["kubelet"] = kubelet


def convert(documents: Iterable[Any], *, cluster_name: str | None = None) -> ConversionResult:
    """Convert parsed YAML/JSON documents (None entries are skipped) into daiku objects.

    `cluster_name` fills the discovery tag and node role of EC2NodeClasses whose source did not
    say; without it a placeholder is written and a warning asks to replace it.
    Raises ConversionError for input that cannot be read, naming the object and field.
    """
    converter = _Converter(cluster_name=cluster_name)
    objects: list[dict[str, Any]] = []
    for index, document in enumerate(documents):
        objects.extend(converter.convert(index, document))
    converter.attach_pending_kubelet(objects)
    fill_requests(objects, converter.pending_templates, converter.warn)
    return ConversionResult(objects=tuple(objects), warnings=tuple(converter.warnings))


_Handler = Callable[[_Converter, Mapping[str, Any], str], list[dict[str, Any]]]
_HANDLERS: dict[tuple[str, str], _Handler] = {
    ("karpenter.sh/v1", "NodePool"): lambda c, d, r: [c.nodepool_v1(d, r)],
    (DAIKU_API_VERSION, "NodePool"): lambda c, d, r: [c.nodepool_v1(d, r)],
    ("karpenter.sh/v1beta1", "NodePool"): lambda c, d, r: [c.nodepool_v1beta1(d, r)],
    ("karpenter.k8s.aws/v1", "EC2NodeClass"): lambda c, d, r: [c.ec2nodeclass_v1(d, r)],
    ("karpenter.k8s.aws/v1beta1", "EC2NodeClass"): lambda c, d, r: [c.ec2nodeclass_v1(d, r)],
    (DAIKU_API_VERSION, "EC2NodeClass"): lambda c, d, r: [c.ec2nodeclass_v1(d, r)],
    ("karpenter.sh/v1alpha5", "Provisioner"): lambda c, d, r: c.provisioner(d, r),
    ("karpenter.sh/v1alpha1", "NodeOverlay"): lambda c, d, r: [c.nodeoverlay_v1alpha1(d, r)],
    (DAIKU_OVERLAY_API_VERSION, "NodeOverlay"): lambda c, d, r: [c.nodeoverlay_v1alpha1(d, r)],
    ("karpenter.k8s.aws/v1alpha1", "AWSNodeTemplate"): lambda c, d, r: [c.awsnodetemplate(d, r)],
    (UPSTREAM_API_VERSION, "CapacityBuffer"): lambda c, d, r: [
        capacity_buffer(d, r, c.warn, c.pending_templates)
    ],
    (DAIKU_OVERLAY_API_VERSION, "CapacityBuffer"): lambda c, d, r: [copy.deepcopy(dict(d))],
}


def duration_from_seconds(seconds: int) -> str:
    """A Go-style duration string: 1800 → "30m", 2592000 → "720h", 90 → "1m30s", 0 → "0s"."""
    if seconds < 0:
        raise ValueError(f"duration must not be negative: {seconds}")
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [
        f"{hours}h" if hours else "",
        f"{minutes}m" if minutes else "",
        f"{secs}s" if secs else "",
    ]
    return "".join(parts) or "0s"


def _daiku_object(kind: str, source: Mapping[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    metadata = dict(source.get("metadata") or {})
    out_metadata: dict[str, Any] = {
        k: copy.deepcopy(v)
        for k, v in metadata.items()
        if k not in _SERVER_METADATA and k not in ("namespace", "finalizers", "ownerReferences")
    }
    annotations = out_metadata.get("annotations")
    if isinstance(annotations, dict):
        annotations.pop(_LAST_APPLIED, None)
        if not annotations:
            out_metadata.pop("annotations")
    return {"apiVersion": DAIKU_API_VERSION, "kind": kind, "metadata": out_metadata, "spec": spec}


def _name(document: Mapping[str, Any], index: int) -> str:
    metadata = document.get("metadata")
    if isinstance(metadata, Mapping) and metadata.get("name"):
        return str(metadata["name"])
    return f"<document {index} without metadata.name>"


def _mapping(value: Any, ref: str, path: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ConversionError(f"{ref}: {path}: expected a mapping, got {type(value).__name__}")
    return value


def _dict(value: Any, ref: str, path: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ConversionError(f"{ref}: {path}: expected a mapping, got {type(value).__name__}")
    return value


def _seconds(value: Any, ref: str, path: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConversionError(f"{ref}: {path}: expected a non-negative integer, got {value!r}")
    return value
