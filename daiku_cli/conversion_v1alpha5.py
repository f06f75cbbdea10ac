"""Karpenter before v0.32 (`karpenter.sh/v1alpha5` Provisioner, `karpenter.k8s.aws/v1alpha1`
AWSNodeTemplate) into daiku's NodePool and EC2NodeClass, with the semantics of Karpenter's own
v1alpha5 → v1 migration (see `daiku_cli.conversion`). Pure."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from daiku_cli.conversion_fields import (
    ALIAS_FAMILIES,
    DAIKU_API_VERSION,
    DAIKU_GROUP,
    KUBELET_FIELDS,
    ConversionError,
    FieldConverter,
    daiku_object,
    document_name,
    duration_from_seconds,
    mapping_at,
    seconds_at,
)


@dataclass
class V1Alpha5Converter(FieldConverter):
    """Provisioners and AWSNodeTemplates; a Provisioner's kubeletConfiguration waits here for
    the EC2NodeClass it references (`attach_pending_kubelet`)."""

    pending_kubelet: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)

    def provisioner(self, document: Mapping[str, Any], ref: str) -> list[dict[str, Any]]:
        spec = dict(mapping_at(document.get("spec", {}), ref, "spec"))
        template_metadata = self.provisioner_template_metadata(spec, ref)
        template_spec = self.provisioner_template_spec(spec, ref)
        nodepool_spec: dict[str, Any] = {"disruption": self.provisioner_disruption(spec, ref)}
        if "limits" in spec:
            limits = mapping_at(spec.pop("limits"), ref, "spec.limits")
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
        nodepool = daiku_object("NodePool", document, {"template": template, **nodepool_spec})
        return [nodepool, *node_classes]

    def provisioner_template_metadata(self, spec: dict[str, Any], ref: str) -> dict[str, Any]:
        """labels and annotations of the Provisioner's nodes (popped from `spec`)."""
        metadata: dict[str, Any] = {}
        if "labels" in spec:
            metadata["labels"] = self.labels(
                mapping_at(spec.pop("labels"), ref, "spec.labels"), ref, "spec.labels"
            )
        if "annotations" in spec:
            metadata["annotations"] = {
                str(k): str(v)
                for k, v in mapping_at(spec.pop("annotations"), ref, "spec.annotations").items()
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
            else duration_from_seconds(seconds_at(ttl_expired, ref, "spec.ttlSecondsUntilExpired"))
        )
        return template_spec

    def provisioner_disruption(self, spec: dict[str, Any], ref: str) -> dict[str, Any]:
        """The NodePool disruption block from ttlSecondsAfterEmpty / consolidation (popped)."""
        ttl_empty = spec.pop("ttlSecondsAfterEmpty", None)
        consolidation = mapping_at(spec.pop("consolidation", {}) or {}, ref, "spec.consolidation")
        if consolidation.get("enabled") is True:
            if ttl_empty is not None:
                self.warn(
                    ref,
                    "spec.ttlSecondsAfterEmpty",
                    "ignored: consolidation.enabled already removes empty nodes",
                )
            return {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s"}
        if ttl_empty is not None:
            seconds = seconds_at(ttl_empty, ref, "spec.ttlSecondsAfterEmpty")
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
        name = document_name(document, 0)
        kubelet = spec.pop("kubeletConfiguration", None)
        kubelet_settings = (
            self.keep(
                mapping_at(kubelet, ref, "spec.kubeletConfiguration"),
                KUBELET_FIELDS,
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
                mapping_at(provider, ref, "spec.provider"),
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
            node_class_name = str(mapping_at(provider_ref, ref, "spec.providerRef").get("name", ""))
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
        spec = mapping_at(document.get("spec", {}), ref, "spec")
        name = document_name(document, 0)
        node_class = self.node_class_from_v1alpha(spec, f"EC2NodeClass/{name}", ref, "spec")
        return daiku_object("EC2NodeClass", document, node_class)

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
                    mapping_at(source.pop(selector_field), ref, f"{path}.{selector_field}")
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
                mapping_at(source.pop("amiSelector"), ref, f"{path}.amiSelector")
            )
            spec["amiFamily"] = family if family in ALIAS_FAMILIES else "Custom"
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
            spec["tags"] = self.tags(mapping_at(source.pop("tags"), ref, f"{path}.tags"), ref)
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
