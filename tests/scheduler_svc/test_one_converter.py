"""One converter: the same Kubernetes objects give the same core models, and the same plan, in
the live provisioner (its snapshot, and its own round), the disruption simulator's snapshot and
`daiku plan`; the drain reads budgets and tolerations as the simulator and the solver do."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, cast

import pytest
import yaml
from typer.testing import CliRunner

from daiku_cli.main import app
from daiku_cli.plan import build_input, instance_types_from_document
from scheduler_svc.core import SchedulingInput, solve
from scheduler_svc.core.model import InstanceType, NodeClaimPlan
from scheduler_svc.disruption.snapshot import build_snapshot
from scheduler_svc.kube.convert import pod_from_k8s, tolerations_from_k8s
from scheduler_svc.kube.convert_disruption import pdb_from_k8s
from scheduler_svc.kube.events import ObjectEvent
from scheduler_svc.kube.resources import (
    DAEMON_SETS,
    EC2_NODE_CLASSES,
    NODE_CLAIMS,
    NODE_POOLS,
    NODES,
    POD_DISRUPTION_BUDGETS,
    PODS,
    Resource,
)
from scheduler_svc.kube.writer import DISRUPTED_TAINT_KEY, KubeWriter
from scheduler_svc.lifecycle.termination import (
    Terminator,
    is_drained_by_termination,
)
from scheduler_svc.metrics import SchedulerMetrics
from scheduler_svc.provisioning.batcher import Batcher
from scheduler_svc.provisioning.catalog import InstanceTypeCatalog
from scheduler_svc.provisioning.creator import NodeClaimCreator
from scheduler_svc.provisioning.provisioner import Provisioner
from scheduler_svc.provisioning.unavailable import UnavailableOfferingsCache
from scheduler_svc.state.cluster import ClusterMirror, is_provisionable_pod
from scheduler_svc.state.core_snapshot import CoreSnapshotter

STARTUP_TAINT = {"key": "example.com/agent-not-ready", "effect": "NoSchedule"}
NOT_READY_TAINT = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}
PROVIDER_ID = "aws:///us-east-1a/i-0123456789abcdef0"

CATALOG = {
    "instanceTypes": [
        {
            "name": name,
            "capacity": {"cpu": cpu, "memory": memory, "pods": "29"},
            "allocatable": {"cpu": allocatable_cpu, "memory": memory, "pods": "29"},
            "labels": {"kubernetes.io/arch": "amd64"},
            "offerings": [
                {"zone": zone, "capacityType": "on-demand", "price": price}
                for zone in ("us-east-1a", "us-east-1b")
            ],
        }
        for name, cpu, allocatable_cpu, memory, price in (
            ("c5.large", "2", "1930m", "3500Mi", 0.085),
            ("m5.large", "2", "1930m", "7000Mi", 0.096),
            ("m5.xlarge", "4", "3920m", "14000Mi", 0.192),
        )
    ]
}


def pending_pod(name: str, cpu: str, **spec: Any) -> dict[str, Any]:
    """A pod kube-scheduler gave up on (what the live provisioner takes)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}], **spec},
        "status": {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
        },
    }


def manifests() -> list[dict[str, Any]]:
    """A NodePool with a startup taint, its node still starting (NodeClaim not Initialized)
    with one pod, a DaemonSet, and pending pods with a spread and a toleration."""
    labels = {
        "karpenter.sh/nodepool": "default",
        "topology.kubernetes.io/zone": "us-east-1a",
        "node.kubernetes.io/instance-type": "m5.large",
        "karpenter.sh/capacity-type": "on-demand",
        "kubernetes.io/hostname": "ip-10-0-0-1",
    }
    return [
        {
            "apiVersion": "karpenter.k8s.aws/v1",
            "kind": "EC2NodeClass",
            "metadata": {"name": "default"},
            "spec": {
                "role": "KarpenterNodeRole-demo",
                "amiSelectorTerms": [{"alias": "al2023@latest"}],
                "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
                "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
            },
        },
        {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodePool",
            "metadata": {"name": "default"},
            "spec": {
                "template": {
                    "spec": {
                        "nodeClassRef": {"name": "default"},
                        "requirements": [
                            {
                                "key": "karpenter.sh/capacity-type",
                                "operator": "In",
                                "values": ["on-demand"],
                            }
                        ],
                        "startupTaints": [STARTUP_TAINT],
                    }
                }
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "ip-10-0-0-1", "labels": labels},
            "spec": {"providerID": PROVIDER_ID, "taints": [STARTUP_TAINT, NOT_READY_TAINT]},
            "status": {
                "capacity": {"cpu": "2", "memory": "7000Mi", "pods": "29"},
                "allocatable": {"cpu": "1930m", "memory": "7000Mi", "pods": "29"},
            },
        },
        {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodeClaim",
            "metadata": {"name": "default-abcde", "labels": {"karpenter.sh/nodepool": "default"}},
            "spec": {"startupTaints": [STARTUP_TAINT], "requirements": []},
            "status": {
                "providerID": PROVIDER_ID,
                "nodeName": "ip-10-0-0-1",
                "conditions": [{"type": "Initialized", "status": "False", "reason": "Waiting"}],
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "running", "namespace": "default"},
            "spec": {
                "nodeName": "ip-10-0-0-1",
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "500m"}}}],
            },
            "status": {"phase": "Running"},
        },
        {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {"name": "agent", "namespace": "kube-system"},
            "spec": {
                "template": {
                    "spec": {
                        "containers": [{"name": "a", "resources": {"requests": {"cpu": "100m"}}}]
                    }
                }
            },
        },
        pending_pod("web-0", "1"),
        pending_pod(
            "web-1",
            "1200m",
            topologySpreadConstraints=[
                {
                    "maxSkew": 1,
                    "topologyKey": "topology.kubernetes.io/zone",
                    "labelSelector": {"matchLabels": {"app": "web"}},
                }
            ],
        ),
        pending_pod("web-2", "700m", tolerations=[{"operator": "Exists"}]),
    ]


RESOURCES: dict[str, Resource] = {
    "EC2NodeClass": EC2_NODE_CLASSES,
    "NodePool": NODE_POOLS,
    "Node": NODES,
    "NodeClaim": NODE_CLAIMS,
    "Pod": PODS,
    "DaemonSet": DAEMON_SETS,
}


def live_mirror() -> ClusterMirror:
    """The mirror as the watches feed it (objects slimmed as the service slims them)."""
    mirror = ClusterMirror()
    for obj in manifests():
        mirror.handle(ObjectEvent(RESOURCES[obj["kind"]], "ADDED", copy.deepcopy(obj)))
    return mirror


def claims(problem: SchedulingInput) -> tuple[list[tuple[str, tuple[str, ...]]], list[Any]]:
    result = solve(problem)
    return (
        sorted((c.instance_type, tuple(sorted(c.pods))) for c in result.new_claims),
        sorted((p.node, tuple(sorted(p.pods))) for p in result.existing_placements),
    )


def test_plan_live_and_disruption_convert_the_same_objects_alike(tmp_path: Path) -> None:
    """The provisioner's snapshot, the disruption simulator's snapshot and `daiku plan`'s input
    hold equal pods, nodes, NodePools and DaemonSet pods, and solve to the same NodeClaims."""
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all(manifests()))
    catalog_path = tmp_path / "catalog.json"
    catalog_path.write_text(json.dumps(CATALOG))
    instance_types = tuple(instance_types_from_document(CATALOG, "catalog"))

    planned = build_input([str(path)], str(catalog_path))

    mirror = live_mirror()
    live = CoreSnapshotter(mirror).snapshot(pod_filter=is_provisionable_pod)
    assert live.invalid == ()
    disruption = build_snapshot(mirror, CoreSnapshotter(mirror), instance_types=instance_types)

    by_key = sorted(planned.pods, key=lambda p: p.key)
    assert by_key == sorted(live.pending_pods, key=lambda p: p.key)
    assert by_key == sorted(disruption.pending_pods, key=lambda p: p.key)
    assert planned.nodes == live.nodes
    simulated_nodes = (*(c.to_node() for c in disruption.candidates), *disruption.other_nodes)
    assert [(n.name, n.taints, n.allocatable, n.pods) for n in simulated_nodes] == [
        (n.name, n.taints, n.allocatable, n.pods) for n in live.nodes
    ]
    assert planned.nodepools == live.nodepools == tuple(p.nodepool for p in disruption.nodepools)
    assert planned.daemonsets == live.daemonsets == disruption.daemonsets

    live_problem = SchedulingInput(
        pods=live.pending_pods,
        nodepools=live.nodepools,
        instance_types=instance_types,
        nodes=live.nodes,
        daemonsets=live.daemonsets,
    )
    assert claims(planned) == claims(live_problem)
    # The starting node's startup and not-ready taints do not keep pods off it.
    new, placed = claims(live_problem)
    assert [node for node, _ in placed] == ["ip-10-0-0-1"]

    out = CliRunner().invoke(
        app, ["plan", "-f", str(path), "--catalog", str(catalog_path), "-o", "json"]
    )
    document = json.loads(out.stdout)
    assert (
        sorted((c["instanceType"], tuple(sorted(c["pods"]))) for c in document["nodeClaims"]) == new
    )


async def test_the_provisioners_own_round_asks_for_the_claims_plan_prints(tmp_path: Path) -> None:
    """`Provisioner.provision_once` over the live mirror of the same manifests asks its
    NodeClaim creator for the claims `daiku plan`'s input solves to (the test above shows the
    command prints those)."""
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all(manifests()))
    catalog_path = tmp_path / "catalog.json"
    catalog_path.write_text(json.dumps(CATALOG))
    planned_claims, _ = claims(build_input([str(path)], str(catalog_path)))
    assert planned_claims  # the manifests need new claims, so the comparison means something
    instance_types = tuple(instance_types_from_document(CATALOG, "catalog"))
    assert await provisioner_round(live_mirror(), instance_types) == planned_claims


class _RecordingCreator:
    """Stands in for NodeClaimCreator: records what the round asks for, writes nothing."""

    def __init__(self) -> None:
        self.plans: list[NodeClaimPlan] = []

    async def create(self, plan: NodeClaimPlan, nodepool: Any, **_: Any) -> None:
        self.plans.append(plan)


class _Writer:
    """Accepts every write (status conditions, Events) and keeps none."""

    def __getattr__(self, name: str) -> Any:
        async def write(*_: Any, **__: Any) -> dict[str, Any]:
            return {}

        return write


class _Catalog:
    def __init__(self, instance_types: tuple[InstanceType, ...]) -> None:
        self._instance_types = instance_types

    async def instance_types(self, node_class: Any) -> tuple[InstanceType, ...]:
        return self._instance_types


async def provisioner_round(
    mirror: ClusterMirror, instance_types: tuple[InstanceType, ...]
) -> list[tuple[str, tuple[str, ...]]]:
    """One `Provisioner.provision_once` over the mirror: the NodeClaims it would create."""
    creator = _RecordingCreator()
    provisioner = Provisioner(
        mirror=mirror,
        writer=cast(KubeWriter, _Writer()),
        catalog=cast(InstanceTypeCatalog, _Catalog(instance_types)),
        creator=cast(NodeClaimCreator, creator),
        unavailable=UnavailableOfferingsCache(),
        metrics=SchedulerMetrics(),
        batcher=Batcher(idle_seconds=1, max_seconds=10),
    )
    result = await provisioner.provision_once()
    assert result.invalid == []
    return sorted((p.instance_type, tuple(sorted(p.pods))) for p in creator.plans)


WEB_POD: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "web-0", "namespace": "default", "labels": {"app": "web"}},
    "spec": {"nodeName": "ip-10-0-0-1", "containers": [{"name": "c"}]},
    "status": {"phase": "Running"},
}


@pytest.mark.parametrize(
    ("spec", "covers"),
    [
        ({"selector": {"matchLabels": {"app": "web"}}}, True),
        (
            {"selector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["x"]}]}},
            False,
        ),
        ({"selector": {}}, True),  # policy/v1: an empty selector selects every pod of its namespace
        ({}, False),  # a null selector selects none (LabelSelectorAsSelector(nil) is Nothing)
    ],
    ids=["labels", "expressions", "empty", "absent"],
)
def test_the_drain_and_the_disruption_simulator_read_a_budget_alike(
    spec: dict[str, Any], covers: bool
) -> None:
    """The drain (which names the budget that refused an eviction) and the disruption
    simulator (which counts a budget's pods) read the same PodDisruptionBudget through the one
    converter, so they agree on which pods it covers."""
    pdb = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"maxUnavailable": 1, **spec},
        "status": {"disruptionsAllowed": 1},
    }
    mirror = ClusterMirror()
    mirror.handle(ObjectEvent(POD_DISRUPTION_BUDGETS, "ADDED", copy.deepcopy(pdb)))
    terminator = Terminator(
        mirror=mirror,
        writer=None,  # type: ignore[arg-type]  # pdb_of only reads the mirror
        actuator=None,
        metrics=SchedulerMetrics(),
    )
    drained_pod_covered = terminator.pdb_of(WEB_POD) == "default/web"
    simulated_pod_covered = pdb_from_k8s(pdb).covers(pod_from_k8s(WEB_POD))
    assert drained_pod_covered == simulated_pod_covered == covers


@pytest.mark.parametrize(
    ("tolerations", "drained"),
    [
        ([{"operator": "Exists"}], False),
        ([{"key": DISRUPTED_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}], False),
        ([{"key": DISRUPTED_TAINT_KEY, "operator": "Exists", "effect": "NoExecute"}], True),
        ([{"key": "other", "operator": "Exists"}], True),
    ],
    ids=["all", "disrupted", "other-effect", "other-key"],
)
def test_the_drain_reads_tolerations_as_the_scheduler_does(
    tolerations: list[dict[str, Any]], drained: bool
) -> None:
    """Whether a pod tolerates the disrupted taint (so the drain leaves it) is read with the
    converter that gives the solver its tolerations."""
    pod = copy.deepcopy(WEB_POD)
    pod["spec"]["tolerations"] = tolerations
    assert is_drained_by_termination(pod) is drained
    assert tolerations_from_k8s(pod) == pod_from_k8s(pod).tolerations
