"""What every `daiku convert` input shares: the errors and warnings, the field-level
conversions (labels, tags, requirements, kubelet settings) and small readers. Pure."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from scheduler_svc.core.requirements import Operator

DAIKU_API_VERSION = "daiku.dev/v1"
DAIKU_GROUP = "daiku.dev"

# Written into generated EC2NodeClasses when the input does not say; a warning asks to replace it.
CLUSTER_NAME_PLACEHOLDER = "CLUSTER_NAME"

# metadata the API server owns; never copied.
_SERVER_METADATA = frozenset(
    {"uid", "resourceVersion", "generation", "creationTimestamp", "managedFields", "selfLink"}
)
_LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
_TEMPLATE_METADATA_FIELDS = frozenset({"labels", "annotations"})
KUBELET_FIELDS = frozenset(
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

RESERVED_LABELS = frozenset(
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
ALIAS_FAMILIES = {
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


@dataclass
class FieldConverter:
    """Field-level conversions, collecting a warning for each field not carried over."""

    cluster_name: str | None
    warnings: list[ConversionWarning] = field(default_factory=list)

    def warn(self, ref: str, field_path: str, message: str) -> None:
        self.warnings.append(ConversionWarning(ref, field_path, message))

    @property
    def cluster(self) -> str:
        return self.cluster_name or CLUSTER_NAME_PLACEHOLDER

    def default_ami_terms(self, spec: dict[str, Any], ref: str) -> None:
        family = str(spec.get("amiFamily", "AL2"))
        alias = ALIAS_FAMILIES.get(family)
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
                mapping_at(out["labels"], ref, "spec.template.metadata.labels"),
                ref,
                "spec.template.metadata.labels",
            )
        return out

    def labels(self, labels: Mapping[str, Any], ref: str, path: str) -> dict[str, str]:
        out: dict[str, str] = {}
        for key, value in labels.items():
            if key in RESERVED_LABELS:
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
            requirement = mapping_at(item, ref, item_path)
            if "key" not in requirement or "operator" not in requirement:
                raise ConversionError(f"{ref}: {item_path}: key and operator are required")
            key = str(requirement["key"])
            if key in RESERVED_LABELS and drop_reserved:
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


def daiku_object(kind: str, source: Mapping[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
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


def document_name(document: Mapping[str, Any], index: int) -> str:
    metadata = document.get("metadata")
    if isinstance(metadata, Mapping) and metadata.get("name"):
        return str(metadata["name"])
    return f"<document {index} without metadata.name>"


def mapping_at(value: Any, ref: str, path: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ConversionError(f"{ref}: {path}: expected a mapping, got {type(value).__name__}")
    return value


def dict_at(value: Any, ref: str, path: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ConversionError(f"{ref}: {path}: expected a mapping, got {type(value).__name__}")
    return value


def seconds_at(value: Any, ref: str, path: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConversionError(f"{ref}: {path}: expected a non-negative integer, got {value!r}")
    return value
