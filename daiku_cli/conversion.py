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
from daiku_cli.conversion_fields import (
    CLUSTER_NAME_PLACEHOLDER,
    DAIKU_API_VERSION,
    DAIKU_GROUP,
    KUBELET_FIELDS,
    RESERVED_LABELS,
    ConversionError,
    ConversionWarning,
    daiku_object,
    dict_at,
    document_name,
    duration_from_seconds,
    mapping_at,
)
from daiku_cli.conversion_v1alpha5 import V1Alpha5Converter

__all__ = [
    "CLUSTER_NAME_PLACEHOLDER",
    "ConversionError",
    "ConversionResult",
    "ConversionWarning",
    "convert",
    "duration_from_seconds",
]

DAIKU_OVERLAY_API_VERSION = "daiku.dev/v1alpha1"

_NODEPOOL_SPEC_FIELDS = frozenset({"template", "disruption", "limits", "weight", "replicas"})
_TEMPLATE_FIELDS = frozenset({"metadata", "spec"})
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


@dataclass(frozen=True)
class ConversionResult:
    """The daiku objects, in input order, and every warning raised while converting."""

    objects: tuple[dict[str, Any], ...]
    warnings: tuple[ConversionWarning, ...]


@dataclass
class _Converter(V1Alpha5Converter):
    """Dispatch by apiVersion and kind; Karpenter v1/v1beta1 and NodeOverlays here, v1alpha5 in
    the base class."""

    # CapacityBuffers waiting for their PodTemplate (namespace, name), by buffer name.
    pending_templates: dict[str, tuple[str, str]] = field(default_factory=dict)

    # --- dispatch -------------------------------------------------------------------------

    def convert(self, index: int, document: Any) -> list[dict[str, Any]]:
        if document is None:
            return []
        if not isinstance(document, Mapping):
            raise ConversionError(f"document {index}: expected a mapping, got {type(document)}")
        api_version = str(document.get("apiVersion", ""))
        kind = str(document.get("kind", ""))
        ref = f"{kind or '<no kind>'}/{document_name(document, index)}"
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
        spec = mapping_at(document.get("spec", {}), ref, "spec")
        out_spec = self.keep(spec, _NODEPOOL_SPEC_FIELDS, ref, "spec")
        template = self.keep(
            mapping_at(spec.get("template", {}), ref, "spec.template"),
            _TEMPLATE_FIELDS,
            ref,
            "spec.template",
        )
        if "metadata" in template:
            template["metadata"] = self.template_metadata(
                mapping_at(template["metadata"], ref, "spec.template.metadata"), ref
            )
        template_spec = self.keep(
            mapping_at(template.get("spec", {}), ref, "spec.template.spec"),
            _TEMPLATE_SPEC_FIELDS,
            ref,
            "spec.template.spec",
        )
        node_class_ref = mapping_at(
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
                mapping_at(out_spec["disruption"], ref, "spec.disruption"),
                _DISRUPTION_FIELDS,
                ref,
                "spec.disruption",
            )
        return daiku_object("NodePool", document, out_spec)

    def nodepool_v1beta1(self, document: Mapping[str, Any], ref: str) -> dict[str, Any]:
        v1 = copy.deepcopy(dict(document))
        spec = dict_at(v1.setdefault("spec", {}), ref, "spec")
        template_spec = dict_at(
            dict_at(spec.setdefault("template", {}), ref, "spec.template").setdefault("spec", {}),
            ref,
            "spec.template.spec",
        )
        disruption = dict_at(spec.get("disruption", {}), ref, "spec.disruption")
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
            mapping_at(document.get("spec", {}), ref, "spec"),
            _EC2NODECLASS_SPEC_FIELDS,
            ref,
            "spec",
        )
        if document.get("apiVersion") == "karpenter.k8s.aws/v1beta1" and (
            "amiSelectorTerms" not in spec
        ):
            # v1beta1 picked the latest EKS AMI of the family when no term was given.
            self.default_ami_terms(spec, ref)
        if "tags" in spec:
            spec["tags"] = self.tags(mapping_at(spec["tags"], ref, "spec.tags"), ref)
        if "kubelet" in spec:
            spec["kubelet"] = self.keep(
                mapping_at(spec["kubelet"], ref, "spec.kubelet"),
                KUBELET_FIELDS,
                ref,
                "spec.kubelet",
            )
        return daiku_object("EC2NodeClass", document, spec)

    def nodeoverlay_v1alpha1(self, document: Mapping[str, Any], ref: str) -> dict[str, Any]:
        """karpenter.sh/v1alpha1 NodeOverlay: the same fields under daiku.dev/v1alpha1."""
        spec = self.keep(
            mapping_at(document.get("spec", {}), ref, "spec"), _NODEOVERLAY_SPEC_FIELDS, ref, "spec"
        )
        if "requirements" in spec:
            # Kept whole, NodePool keys too: dropping one would widen the overlay. daiku's
            # instance types carry no NodePool label, so such a requirement matches nothing.
            spec["requirements"] = self.requirements(
                spec["requirements"], ref, "spec.requirements", drop_reserved=False
            )
            for i, requirement in enumerate(spec["requirements"]):
                if requirement["key"] in RESERVED_LABELS:
                    self.warn(
                        ref,
                        f"spec.requirements[{i}].key",
                        f"daiku applies overlays per instance type, not per NodePool: "
                        f"{requirement['key']} matches no instance type",
                    )
        converted = daiku_object("NodeOverlay", document, spec)
        converted["apiVersion"] = DAIKU_OVERLAY_API_VERSION
        return converted


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
