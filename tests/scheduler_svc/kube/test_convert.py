"""Raw Kubernetes objects to the core's dataclasses, and clear errors for bad input."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler_svc.core.model import WhenUnsatisfiable
from scheduler_svc.core.requirements import Operator, Requirement
from scheduler_svc.core.taints import Taint, TaintEffect
from scheduler_svc.errors import InvalidObjectError
from scheduler_svc.kube.convert import (
    daemonset_pod_from_k8s,
    kubelet_from_k8s,
    node_class_from_k8s,
    node_from_k8s,
    node_from_nodeclaim,
    nodepool_from_k8s,
    pod_from_k8s,
    volume_zones_of,
)

POD = yaml.safe_load(
    """
metadata: {name: web-1, namespace: shop, labels: {app: web}}
spec:
  nodeSelector: {kubernetes.io/arch: amd64}
  overhead: {cpu: 10m}
  initContainers:
  - name: setup
    resources: {requests: {cpu: "1", memory: 1Gi}}
  - name: proxy
    restartPolicy: Always
    resources: {requests: {cpu: 100m, memory: 64Mi}}
  containers:
  - name: app
    resources: {requests: {cpu: 500m, memory: 512Mi}, limits: {nvidia.com/gpu: "1"}}
    ports: [{containerPort: 80, hostPort: 8080}]
  tolerations:
  - {key: dedicated, operator: Equal, value: web, effect: NoSchedule}
  - {operator: Exists}
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
        - matchExpressions:
          - {key: karpenter.sh/capacity-type, operator: In, values: [spot]}
      preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 10
        preference:
          matchExpressions: [{key: topology.kubernetes.io/zone, operator: In, values: [us-east-1a]}]
    podAntiAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
      - topologyKey: kubernetes.io/hostname
        labelSelector: {matchLabels: {app: web}}
  topologySpreadConstraints:
  - {maxSkew: 2, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: ScheduleAnyway,
     labelSelector: {matchLabels: {app: web}}}
"""
)


def test_a_pod_keeps_every_scheduling_constraint_in_base_units() -> None:
    """A pod's requests (limits standing in for missing requests), sidecars, overhead,
    selectors, affinities, tolerations, spread and host ports all reach the core model."""
    pod = pod_from_k8s(POD, volume_zones=["us-east-1a"])

    assert (pod.namespace, pod.name, dict(pod.labels)) == ("shop", "web-1", {"app": "web"})
    (app,) = pod.containers
    assert (app.cpu_millis, app.memory_bytes, app.extended) == (
        500,
        512 * 2**20,
        (("nvidia.com/gpu", 1),),
    )
    assert [(i.requests.cpu_millis, i.is_sidecar) for i in pod.init_containers] == [
        (1000, False),
        (100, True),
    ]
    assert pod.overhead.cpu_millis == 10
    assert dict(pod.node_selector) == {"kubernetes.io/arch": "amd64"}
    assert pod.required_node_affinity == (
        (Requirement("karpenter.sh/capacity-type", Operator.IN, ("spot",)),),
    )
    assert pod.preferred_node_affinity[0].weight == 10
    assert pod.tolerations[0].effect is TaintEffect.NO_SCHEDULE
    assert pod.tolerations[1].operator == "Exists"
    assert pod.pod_anti_affinity[0].topology_key == "kubernetes.io/hostname"
    assert pod.pod_anti_affinity[0].label_selector.matches({"app": "web"})
    spread = pod.topology_spread[0]
    assert (spread.max_skew, spread.when_unsatisfiable) == (2, WhenUnsatisfiable.SCHEDULE_ANYWAY)
    assert [(p.port, p.host_ip) for p in pod.host_ports] == [(8080, "0.0.0.0")]
    assert pod.volume_zones == ("us-east-1a",)
    # max(1000 setup (before the sidecar starts), 100 sidecar + 500 app) + 10 overhead
    assert pod.requests().cpu_millis == 1010


def _with(obj: dict[str, Any], path: list[Any], value: Any) -> dict[str, Any]:
    result: Any = yaml.safe_load(yaml.safe_dump(obj))
    target = result
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    return dict(result)


@pytest.mark.parametrize(
    ("path", "value", "field", "reason"),
    [
        (
            ["spec", "containers", 0, "resources", "requests", "cpu"],
            "lots",
            "spec.containers[0].resources.requests.cpu",
            "not a quantity",
        ),
        (
            ["spec", "tolerations", 0, "effect"],
            "NoWay",
            "spec.tolerations[0].effect",
            "unknown taint effect",
        ),
        (
            [
                "spec",
                "affinity",
                "nodeAffinity",
                "requiredDuringSchedulingIgnoredDuringExecution",
                "nodeSelectorTerms",
                0,
                "matchExpressions",
                0,
                "operator",
            ],
            "Near",
            "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
            ".nodeSelectorTerms[0].matchExpressions[0].operator",
            "unknown operator",
        ),
        (["spec", "nodeSelector"], ["not", "a", "map"], "spec.nodeSelector", "expected an object"),
        (
            ["spec", "overhead", "memory"],
            {"nested": 1},
            "spec.overhead.memory",
            "is not a quantity",
        ),
    ],
)
def test_bad_input_names_the_object_and_the_field(
    path: list[Any], value: Any, field: str, reason: str
) -> None:
    """Invalid input raises InvalidObjectError naming the pod, the field path and the problem."""
    with pytest.raises(InvalidObjectError) as raised:
        pod_from_k8s(_with(POD, path, value))
    assert raised.value.field == field
    assert reason in raised.value.reason
    assert str(raised.value).startswith("Pod shop/web-1: ")


def test_an_object_without_a_name_is_rejected() -> None:
    """An object lacking metadata.name raises InvalidObjectError for that field."""
    with pytest.raises(InvalidObjectError, match=r"metadata\.name"):
        node_from_k8s({"metadata": {}})


def test_a_node_carries_labels_taints_and_resources() -> None:
    """A Node becomes a core Node with its labels, taints, allocatable and capacity."""
    node = node_from_k8s(
        {
            "metadata": {"name": "ip-10-0-0-1", "labels": {"daiku.dev/nodepool": "default"}},
            "spec": {"taints": [{"key": "daiku.dev/unregistered", "effect": "NoExecute"}]},
            "status": {
                "allocatable": {"cpu": "1930m", "memory": "7Gi", "pods": "29"},
                "capacity": {"cpu": "2", "memory": "8Gi", "pods": "29"},
            },
        }
    )
    assert node.nodepool() == "default"
    assert node.taints == (Taint("daiku.dev/unregistered", TaintEffect.NO_EXECUTE),)
    assert (node.allocatable.cpu_millis, node.allocatable.pods) == (1930, 29)
    assert node.capacity is not None
    assert node.capacity.memory_bytes == 8 * 2**30
    assert not node.is_in_flight


def test_an_in_flight_nodeclaim_is_a_node_labelled_by_its_single_valued_requirements() -> None:
    """A NodeClaim without a node is an in-flight Node: single-valued In requirements become
    labels, its requests stand in for allocatable until status reports it."""
    claim = {
        "metadata": {"name": "default-x1", "labels": {"daiku.dev/nodepool": "default"}},
        "spec": {
            "requirements": [
                {
                    "key": "node.kubernetes.io/instance-type",
                    "operator": "In",
                    "values": ["m5.large"],
                },
                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["a", "b"]},
            ],
            "resources": {"requests": {"cpu": "1500m", "memory": "1Gi"}},
        },
    }
    node = node_from_nodeclaim(claim)
    assert node.is_in_flight
    assert dict(node.labels) == {
        "node.kubernetes.io/instance-type": "m5.large",
        "daiku.dev/nodepool": "default",
    }
    assert node.allocatable.cpu_millis == 1500
    launched = node_from_nodeclaim({**claim, "status": {"allocatable": {"cpu": "1930m"}}})
    assert launched.allocatable.cpu_millis == 1930


def test_a_nodepool_keeps_requirements_min_values_taints_weight_and_limits() -> None:
    """A Karpenter v1 NodePool's template, weight and limits reach the core NodePool."""
    pool = nodepool_from_k8s(
        yaml.safe_load(
            """
metadata: {name: default}
spec:
  weight: 10
  limits: {cpu: "100", memory: 400Gi}
  template:
    metadata: {labels: {team: ml}}
    spec:
      requirements:
      - {key: karpenter.k8s.aws/instance-family, operator: In, values: [m5, c5], minValues: 2}
      - {key: karpenter.k8s.aws/instance-cpu, operator: Gt, values: ["1"]}
      taints: [{key: ml, value: "true", effect: NoSchedule}]
      startupTaints: [{key: init, effect: NoSchedule}]
"""
        )
    )
    assert pool.requirements[0].min_values == 2
    assert pool.requirements[1].operator is Operator.GT
    assert dict(pool.labels) == {"team": "ml"}
    assert pool.taints == (Taint("ml", TaintEffect.NO_SCHEDULE, "true"),)
    assert pool.startup_taints == (Taint("init", TaintEffect.NO_SCHEDULE),)
    assert pool.weight == 10
    assert (pool.limits.cpu_millis, pool.limits.memory_bytes, pool.limits.nodes) == (
        100_000,
        400 * 2**30,
        None,
    )


def test_a_nodepool_requirement_without_values_is_named() -> None:
    """An In requirement without values is rejected with the requirement's field path."""
    with pytest.raises(InvalidObjectError) as raised:
        nodepool_from_k8s(
            {
                "metadata": {"name": "bad"},
                "spec": {"template": {"spec": {"requirements": [{"key": "k", "operator": "In"}]}}},
            }
        )
    assert raised.value.field == "spec.template.spec.requirements[0]"
    assert str(raised.value).startswith("NodePool bad: ")


def test_a_daemonset_becomes_the_pod_of_its_template() -> None:
    """A DaemonSet converts to its template's pod: requests and tolerations included."""
    pod = daemonset_pod_from_k8s(
        {
            "metadata": {"name": "fluent-bit", "namespace": "logging"},
            "spec": {
                "template": {
                    "metadata": {"labels": {"app": "fluent-bit"}},
                    "spec": {
                        "containers": [{"name": "f", "resources": {"requests": {"cpu": "100m"}}}],
                        "tolerations": [{"operator": "Exists"}],
                    },
                }
            },
        }
    )
    assert (pod.namespace, pod.name) == ("logging", "fluent-bit")
    assert pod.containers[0].cpu_millis == 100
    assert pod.tolerations[0].operator == "Exists"


def _pv(name: str, *zones: str) -> dict[str, Any]:
    expression = {"key": "topology.kubernetes.io/zone", "operator": "In", "values": list(zones)}
    return {
        "metadata": {"name": name},
        "spec": {
            "nodeAffinity": {
                "required": {"nodeSelectorTerms": [{"matchExpressions": [expression]}]}
            }
        },
    }


def test_volume_zones_come_from_bound_persistent_volumes() -> None:
    """A pod's volume zones are the intersection of its bound PVs' zones; unbound claims
    constrain nothing; disjoint zones are reported on spec.volumes."""
    claims = {
        "shop/data": {"metadata": {"name": "data"}, "spec": {"volumeName": "pv-1"}},
        "shop/logs": {"metadata": {"name": "logs"}, "spec": {"volumeName": "pv-2"}},
        "shop/new": {"metadata": {"name": "new"}, "spec": {}},
    }
    volumes = {"pv-1": _pv("pv-1", "us-east-1a", "us-east-1b"), "pv-2": _pv("pv-2", "us-east-1b")}

    def pod(*claim_names: str) -> dict[str, Any]:
        return {
            "metadata": {"name": "db", "namespace": "shop"},
            "spec": {
                "volumes": [
                    {"name": c, "persistentVolumeClaim": {"claimName": c}} for c in claim_names
                ]
            },
        }

    assert volume_zones_of(pod("data", "logs", "new"), claims, volumes) == ("us-east-1b",)
    assert volume_zones_of(pod("new"), claims, volumes) == ()
    volumes["pv-2"] = _pv("pv-2", "us-east-1c")
    with pytest.raises(InvalidObjectError, match="disjoint zones"):
        volume_zones_of(pod("data", "logs"), claims, volumes)


EC2_NODE_CLASS = yaml.safe_load(
    (Path(__file__).parents[3] / "deploy/examples/ec2nodeclass-default.yaml").read_text()
)


def test_the_example_ec2nodeclass_becomes_the_actuators_launch_parameters() -> None:
    """The shipped EC2NodeClass example converts to the launch settings (selector terms,
    tags, block devices with the volume size in bytes, IMDS options), its kubelet block and
    its root volume size."""
    node_class = node_class_from_k8s(EC2_NODE_CLASS)
    assert node_class.name == "default"
    assert node_class.role == "KarpenterNodeRole-my-cluster"
    assert [t.alias for t in node_class.ami_terms] == ["al2023@latest"]
    assert dict(node_class.subnet_terms[0].tags) == {"karpenter.sh/discovery": "my-cluster"}
    assert dict(node_class.tags) == {"team": "platform"}
    (root,) = node_class.block_device_mappings
    assert (root.device_name, root.root_volume, root.volume_size_bytes) == (
        "/dev/xvda",
        True,
        50 * 2**30,
    )
    assert (root.volume_type, root.encrypted) == ("gp3", True)
    assert node_class.metadata_options.http_tokens == "required"
    assert node_class.metadata_options.http_put_response_hop_limit == 1
    assert node_class.root_volume_size_bytes == 50 * 2**30

    kubelet = kubelet_from_k8s(EC2_NODE_CLASS)
    assert kubelet is not None
    assert kubelet.max_pods == 110
    assert kubelet.pods_per_core is None
    assert dict(kubelet.system_reserved) == {"cpu": "100m", "memory": "100Mi"}
    assert dict(kubelet.eviction_hard) == {"memory.available": "5%"}


def test_an_ec2nodeclass_with_a_bad_volume_size_names_the_field() -> None:
    """A block device whose volumeSize is not a quantity is reported with its field path."""
    broken = _with(EC2_NODE_CLASS, ["spec", "blockDeviceMappings", 0, "ebs", "volumeSize"], "big")
    with pytest.raises(InvalidObjectError) as raised:
        node_class_from_k8s(broken)
    assert str(raised.value).startswith(
        "EC2NodeClass default: spec.blockDeviceMappings[0].ebs.volumeSize"
    )
    assert kubelet_from_k8s({"metadata": {"name": "bare"}, "spec": {}}) is None
