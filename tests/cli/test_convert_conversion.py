"""daiku_cli.conversion maps Karpenter's fields to daiku's and warns about every one it drops."""

from __future__ import annotations

from typing import Any

import pytest

from daiku_cli.conversion import (
    CLUSTER_NAME_PLACEHOLDER,
    ConversionError,
    convert,
    duration_from_seconds,
)


def _provisioner(name: str = "web", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1alpha5",
        "kind": "Provisioner",
        "metadata": {"name": name},
        "spec": spec,
    }


def _only_nodepool(document: dict[str, Any]) -> dict[str, Any]:
    result = convert([document], cluster_name="c1")
    (nodepool,) = [o for o in result.objects if o["kind"] == "NodePool"]
    return nodepool


@pytest.mark.parametrize(
    ("seconds", "duration"),
    [(0, "0s"), (30, "30s"), (90, "1m30s"), (1800, "30m"), (2592000, "720h"), (3661, "1h1m1s")],
)
def test_duration_from_seconds(seconds: int, duration: str) -> None:
    """Seconds become the shortest Go-style duration string."""
    assert duration_from_seconds(seconds) == duration


def test_ttl_after_empty_becomes_when_empty_policy() -> None:
    """ttlSecondsAfterEmpty: 30 becomes consolidationPolicy WhenEmpty after 30s."""
    nodepool = _only_nodepool(_provisioner(ttlSecondsAfterEmpty=30, providerRef={"name": "x"}))
    assert nodepool["spec"]["disruption"] == {
        "consolidationPolicy": "WhenEmpty",
        "consolidateAfter": "30s",
    }


def test_consolidation_enabled_becomes_when_empty_or_underutilized() -> None:
    """consolidation.enabled: true becomes WhenEmptyOrUnderutilized right away."""
    nodepool = _only_nodepool(
        _provisioner(consolidation={"enabled": True}, providerRef={"name": "x"})
    )
    assert nodepool["spec"]["disruption"] == {
        "consolidationPolicy": "WhenEmptyOrUnderutilized",
        "consolidateAfter": "0s",
    }


def test_no_ttl_never_consolidates_and_never_expires() -> None:
    """Without ttlSecondsAfterEmpty, consolidation or ttlSecondsUntilExpired, nodes stay."""
    nodepool = _only_nodepool(_provisioner(providerRef={"name": "x"}))
    assert nodepool["spec"]["disruption"]["consolidateAfter"] == "Never"
    assert nodepool["spec"]["template"]["spec"]["expireAfter"] == "Never"


def test_v1alpha5_webhook_defaults_are_written_out() -> None:
    """A Provisioner without capacity-type/arch requirements gets on-demand and amd64."""
    nodepool = _only_nodepool(_provisioner(providerRef={"name": "x"}))
    requirements = nodepool["spec"]["template"]["spec"]["requirements"]
    assert {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]} in (
        requirements
    )
    assert {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]} in requirements


def test_provider_ref_kubelet_moves_to_the_referenced_node_template() -> None:
    """kubeletConfiguration of a Provisioner lands in the EC2NodeClass its providerRef names."""
    template = {
        "apiVersion": "karpenter.k8s.aws/v1alpha1",
        "kind": "AWSNodeTemplate",
        "metadata": {"name": "tmpl"},
        "spec": {
            "subnetSelector": {"aws-ids": "subnet-1, subnet-2"},
            "securityGroupSelector": {"team": "web"},
            "instanceProfile": "NodeProfile",
            "amiSelector": {"aws::name": "my-ami-*", "aws::owners": "self"},
            "launchTemplate": "legacy",
        },
    }
    provisioner = _provisioner(
        providerRef={"name": "tmpl"},
        kubeletConfiguration={"maxPods": 20, "containerRuntime": "containerd"},
    )
    result = convert([provisioner, template])
    (node_class,) = [o for o in result.objects if o["kind"] == "EC2NodeClass"]
    assert node_class["spec"]["kubelet"] == {"maxPods": 20}
    assert node_class["spec"]["subnetSelectorTerms"] == [{"id": "subnet-1"}, {"id": "subnet-2"}]
    assert node_class["spec"]["securityGroupSelectorTerms"] == [{"tags": {"team": "web"}}]
    assert node_class["spec"]["amiSelectorTerms"] == [{"name": "my-ami-*", "owner": "self"}]
    assert node_class["spec"]["instanceProfile"] == "NodeProfile"
    warned = {(w.object_ref, w.field_path) for w in result.warnings}
    assert warned == {
        ("Provisioner/web", "spec.kubeletConfiguration.containerRuntime"),
        ("AWSNodeTemplate/tmpl", "spec.launchTemplate"),
    }


def test_missing_selectors_use_the_cluster_placeholder_and_warn() -> None:
    """An inline provider without selectors gets discovery-tag selectors and one warning each."""
    result = convert([_provisioner(provider={})])
    (node_class,) = [o for o in result.objects if o["kind"] == "EC2NodeClass"]
    assert node_class["spec"]["subnetSelectorTerms"] == [
        {"tags": {"karpenter.sh/discovery": CLUSTER_NAME_PLACEHOLDER}}
    ]
    assert {w.field_path for w in result.warnings} == {
        "spec.provider.subnetSelector",
        "spec.provider.securityGroupSelector",
        "spec.provider.instanceProfile",
    }


def test_karpenter_v1_changes_only_api_version_and_drops_unknown_fields() -> None:
    """A Karpenter v1 NodePool keeps its fields, points at daiku.dev, drops server metadata,
    and warns about a field daiku lacks."""
    nodepool = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "np", "resourceVersion": "7", "labels": {"a": "b"}},
        "spec": {
            "weight": 5,
            "nodeRepairPolicy": "Auto",
            "template": {
                "spec": {
                    "nodeClassRef": {
                        "group": "karpenter.k8s.aws",
                        "kind": "EC2NodeClass",
                        "name": "nc",
                    },
                    "requirements": [{"key": "k", "operator": "Exists"}],
                }
            },
        },
    }
    result = convert([nodepool])
    (out,) = result.objects
    assert out["apiVersion"] == "daiku.dev/v1"
    assert out["metadata"] == {"name": "np", "labels": {"a": "b"}}
    assert out["spec"]["weight"] == 5
    assert out["spec"]["template"]["spec"]["nodeClassRef"]["group"] == "daiku.dev"
    assert [str(w) for w in result.warnings] == [
        "NodePool/np: spec.nodeRepairPolicy: no daiku equivalent; dropped"
    ]


def test_a_static_karpenter_nodepool_keeps_its_replicas() -> None:
    """A static Karpenter NodePool (spec.replicas, limits.nodes) converts without a warning."""
    nodepool = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "static"},
        "spec": {
            "replicas": 3,
            "limits": {"nodes": 4},
            "template": {"spec": {"nodeClassRef": {"name": "nc"}, "requirements": []}},
        },
    }
    result = convert([nodepool])
    (out,) = result.objects
    assert (out["spec"]["replicas"], out["spec"]["limits"]) == (3, {"nodes": 4})
    assert result.warnings == ()


def test_v1beta1_policy_and_expiry_move() -> None:
    """v1beta1 WhenUnderutilized becomes WhenEmptyOrUnderutilized; disruption.expireAfter moves
    to the template."""
    nodepool = {
        "apiVersion": "karpenter.sh/v1beta1",
        "kind": "NodePool",
        "metadata": {"name": "np"},
        "spec": {
            "template": {"spec": {"nodeClassRef": {"name": "nc"}, "requirements": []}},
            "disruption": {"consolidationPolicy": "WhenUnderutilized", "expireAfter": "24h"},
        },
    }
    (out,) = convert([nodepool]).objects
    assert out["spec"]["disruption"] == {
        "consolidationPolicy": "WhenEmptyOrUnderutilized",
        "consolidateAfter": "0s",
    }
    assert out["spec"]["template"]["spec"]["expireAfter"] == "24h"


def test_reserved_labels_and_tags_are_dropped_with_warnings() -> None:
    """Labels and tags daiku sets itself are dropped, each with a warning naming it."""
    template = {
        "apiVersion": "karpenter.k8s.aws/v1alpha1",
        "kind": "AWSNodeTemplate",
        "metadata": {"name": "t"},
        "spec": {
            "subnetSelector": {"a": "b"},
            "securityGroupSelector": {"a": "b"},
            "instanceProfile": "p",
            "tags": {"kubernetes.io/cluster/x": "owned", "team": "web"},
        },
    }
    provisioner = _provisioner(
        providerRef={"name": "t"}, labels={"karpenter.sh/provisioner-name": "x", "tier": "1"}
    )
    result = convert([provisioner, template])
    nodepool, node_class = result.objects
    assert nodepool["spec"]["template"]["metadata"]["labels"] == {"tier": "1"}
    assert node_class["spec"]["tags"] == {"team": "web"}
    assert {w.field_path for w in result.warnings} == {
        "spec.labels[karpenter.sh/provisioner-name]",
        "spec.tags[kubernetes.io/cluster/x]",
    }


def test_other_objects_pass_through_and_karpenter_runtime_objects_are_skipped() -> None:
    """A Deployment passes through unchanged; a Karpenter Machine is skipped; both warn."""
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}}
    machine = {"apiVersion": "karpenter.sh/v1alpha5", "kind": "Machine", "metadata": {"name": "m"}}
    result = convert([deployment, None, machine])
    assert result.objects == (deployment,)
    assert [w.object_ref for w in result.warnings] == ["Deployment/d", "Machine/m"]


@pytest.mark.parametrize(
    ("document", "fragment"),
    [
        ("not a mapping", "document 0"),
        (_provisioner(ttlSecondsUntilExpired=-1), "Provisioner/web: spec.ttlSecondsUntilExpired"),
        (_provisioner(requirements=[{"operator": "In"}]), "spec.requirements[0]"),
        (_provisioner(providerRef={}), "spec.providerRef.name"),
        ({"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "spec": {}}, "metadata.name"),
    ],
)
def test_unreadable_input_raises_naming_object_and_field(document: Any, fragment: str) -> None:
    """Input that cannot be converted raises ConversionError naming the object and field."""
    with pytest.raises(ConversionError, match=fragment.replace("[", r"\[").replace("]", r"\]")):
        convert([document])


def test_v1beta1_nodeclass_without_ami_terms_gets_its_familys_alias() -> None:
    """A v1beta1 EC2NodeClass with only amiFamily selects that family's latest EKS AMI."""
    node_class = {
        "apiVersion": "karpenter.k8s.aws/v1beta1",
        "kind": "EC2NodeClass",
        "metadata": {"name": "nc"},
        "spec": {"amiFamily": "Bottlerocket", "role": "r"},
    }
    (out,) = convert([node_class]).objects
    assert out["spec"]["amiSelectorTerms"] == [{"alias": "bottlerocket@latest"}]
    assert out["spec"]["amiFamily"] == "Bottlerocket"


_FROB = {"key": "team", "operator": "Frob", "values": ["a"]}


@pytest.mark.parametrize(
    ("document", "object_ref", "field_path"),
    [
        (
            _provisioner(requirements=[_FROB], providerRef={"name": "x"}),
            "Provisioner/web",
            "spec.requirements[0].operator",
        ),
        (
            {
                "apiVersion": "karpenter.sh/v1",
                "kind": "NodePool",
                "metadata": {"name": "web"},
                "spec": {
                    "template": {"spec": {"nodeClassRef": {"name": "x"}, "requirements": [_FROB]}}
                },
            },
            "NodePool/web",
            "spec.template.spec.requirements[0].operator",
        ),
    ],
    ids=["v1alpha5", "v1"],
)
def test_unknown_requirement_operator_is_kept_and_warned(
    document: dict[str, Any], object_ref: str, field_path: str
) -> None:
    """A requirement with an unknown operator (Frob) is kept as written and warned about,
    naming the object, the operator field and the operators daiku knows."""
    result = convert([document], cluster_name="c1")
    (nodepool,) = [o for o in result.objects if o["kind"] == "NodePool"]
    assert _FROB in nodepool["spec"]["template"]["spec"]["requirements"]
    (warning,) = [w for w in result.warnings if w.field_path.endswith(".operator")]
    assert (warning.object_ref, warning.field_path) == (object_ref, field_path)
    assert "'Frob'" in warning.message
    assert "Gte" in warning.message


def test_known_requirement_operators_raise_no_warning() -> None:
    """Every operator daiku knows (In, NotIn, Exists, DoesNotExist, Gt, Lt, Gte, Lte) converts
    without a warning."""
    requirements = [
        {"key": "k", "operator": "In", "values": ["a"]},
        {"key": "k", "operator": "NotIn", "values": ["a"]},
        {"key": "k", "operator": "Exists"},
        {"key": "k", "operator": "DoesNotExist"},
        {"key": "k", "operator": "Gt", "values": ["1"]},
        {"key": "k", "operator": "Lt", "values": ["9"]},
        {"key": "k", "operator": "Gte", "values": ["1"]},
        {"key": "k", "operator": "Lte", "values": ["9"]},
    ]
    result = convert([_provisioner(requirements=requirements, providerRef={"name": "x"})])
    assert not [w for w in result.warnings if "operator" in w.field_path]


def test_an_upstream_capacity_buffer_takes_its_podtemplate_requests() -> None:
    """SIG Autoscaling's CapacityBuffer (Karpenter v1.14's) becomes daiku's: replicas and limits
    carried, the requests summed from the PodTemplate in the input, the NodePool defaulted
    with a warning; scalableRef is dropped with one."""
    template = {
        "apiVersion": "v1",
        "kind": "PodTemplate",
        "metadata": {"name": "shape", "namespace": "default"},
        "template": {
            "spec": {
                "containers": [
                    {"name": "a", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}},
                    {"name": "b", "resources": {"requests": {"cpu": "250m"}}},
                ]
            }
        },
    }
    buffer = {
        "apiVersion": "autoscaling.x-k8s.io/v1alpha1",
        "kind": "CapacityBuffer",
        "metadata": {"name": "burst", "namespace": "default"},
        "spec": {"podTemplateRef": {"name": "shape"}, "replicas": 5, "limits": {"cpu": "20"}},
    }
    result = convert([template, buffer])
    (converted,) = [o for o in result.objects if o["kind"] == "CapacityBuffer"]
    assert converted["apiVersion"] == "daiku.dev/v1alpha1"
    assert converted["spec"] == {
        "nodePoolRef": {"name": "default"},
        "replicas": 5,
        "limits": {"cpu": "20"},
        "requests": {"cpu": "750m", "memory": str(1024**3)},
    }
    assert any("spec.nodePoolRef.name is 'default'" in str(w) for w in result.warnings)
    scalable = {**buffer, "spec": {"scalableRef": {"kind": "Deployment", "name": "web"}}}
    dropped = convert([scalable])
    assert any("spec.scalableRef" in str(w) for w in dropped.warnings)
    assert any("spec.requests" in str(w) for w in dropped.warnings)
