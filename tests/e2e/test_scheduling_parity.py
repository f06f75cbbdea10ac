"""Karpenter's scheduling behaviours on the live stack, where the edge matters (issue 19): the
API server's objects go through the scheduler's watches, converter and provisioner, and
localcloud's default-scheduler binds (or refuses) the pods on the nodes that result.

The tests share one stack (the module's); each cites the upstream test it follows, and each
undoes what the stack's reset does not (DaemonSets, other namespaces).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.e2e.conftest import ON_DEMAND_SMALL, Stack, demo_object, pause_pod_spec
from tests.polling import until

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]

HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


def _pod(name: str, namespace: str = "default", **spec: Any) -> dict[str, Any]:
    labels = spec.pop("labels", {"app": name})
    body = pause_pod_spec("100m", "64Mi")
    body.update(spec)
    return {"metadata": {"name": name, "namespace": namespace, "labels": labels}, "spec": body}


async def _pod_named(stack: Stack, name: str, namespace: str = "default") -> dict[str, Any]:
    return next(p for p in await stack.objects("pods", namespace) if p["metadata"]["name"] == name)


async def _running(stack: Stack, name: str, namespace: str = "default") -> bool:
    pods = await stack.objects("pods", namespace)
    return any(
        p["metadata"]["name"] == name and p.get("status", {}).get("phase") == "Running"
        for p in pods
    )


async def _node_of(stack: Stack, name: str, namespace: str = "default") -> dict[str, Any]:
    node_name = (await _pod_named(stack, name, namespace))["spec"]["nodeName"]
    return next(n for n in await stack.objects("nodes") if n["metadata"]["name"] == node_name)


@contextlib.asynccontextmanager
async def _deleted_after(stack: Stack, plural: str, obj: dict[str, Any]) -> AsyncIterator[None]:
    """Create `obj`, and delete it when the block ends (the stack's reset does not)."""
    namespace = obj["metadata"].get("namespace")
    await stack.store.create(plural, obj, namespace)
    try:
        yield
    finally:
        with contextlib.suppress(Exception):
            await stack.store.delete(
                plural, obj["metadata"]["name"], namespace, grace_period_seconds=0
            )


async def test_a_pod_binding_a_daemonsets_host_port_gets_no_node_and_says_why(
    stack: Stack,
) -> None:
    """node-exporter's DaemonSet binds hostPort 9100 on every new node, so a pod binding 9100
    could never run on one: no NodeClaim is launched and the pod stays Pending with a
    FailedProvisioning event naming the rule (kubernetes-sigs/karpenter
    scheduling/suite_test.go "should account for daemonset hostports")."""
    port = {"containerPort": 9100, "hostPort": 9100}
    exporter = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "node-exporter", "namespace": "default"},
        "spec": {
            "selector": {"matchLabels": {"app": "node-exporter"}},
            "template": {
                "metadata": {"labels": {"app": "node-exporter"}},
                "spec": {"containers": [{"name": "exporter", "image": "e", "ports": [port]}]},
            },
        },
    }
    await stack.apply_pool(requirements=ON_DEMAND_SMALL)
    async with _deleted_after(stack, "daemonsets", exporter):
        scheduler = await stack.start_scheduler()
        metrics = _pod("metrics")
        metrics["spec"]["containers"][0]["ports"] = [port]
        await stack.store.create("pods", metrics, "default")

        async def refused() -> bool:
            return any(
                e.get("reason") == "FailedProvisioning"
                and e["involvedObject"]["name"] == "metrics"
                and "hostPort 9100/TCP taken by DaemonSet node-exporter" in e.get("message", "")
                for e in await stack.objects("events", "default")
            )

        await until(refused, timeout_seconds=30)
        provisioner = scheduler.service.provisioner
        assert provisioner is not None
        before = provisioner.last_round
        provisioner.batcher.trigger()  # one more round with the pod still pending
        await until(lambda: provisioner.last_round is not before)

        assert await stack.objects("nodeclaims") == []
        assert (await _pod_named(stack, "metrics")).get("status", {}).get("phase") == "Pending"


async def test_deprecated_zone_and_arch_selectors_get_a_node_in_that_zone(stack: Stack) -> None:
    """nodeSelector failure-domain.beta.kubernetes.io/zone and beta.kubernetes.io/arch (the
    deprecated spellings) get a node in that zone, where the pod runs (kubernetes-sigs/karpenter
    pkg/scheduling/requirements_test.go "should normalize aliased labels"; AWS provider
    test/suites/scheduling "should support well-known deprecated labels")."""
    zones = sorted(
        z["ZoneName"] for z in stack.ec2_client().describe_availability_zones()["AvailabilityZones"]
    )
    wanted = zones[1]
    await stack.apply_pool(requirements=ON_DEMAND_SMALL)
    await stack.start_scheduler()
    selector = {
        "failure-domain.beta.kubernetes.io/zone": wanted,
        "beta.kubernetes.io/arch": "amd64",
    }
    await stack.store.create("pods", _pod("legacy", nodeSelector=selector), "default")

    await until(lambda: _running(stack, "legacy"), timeout_seconds=30)

    assert (await _node_of(stack, "legacy"))["metadata"]["labels"][ZONE] == wanted


async def test_anti_affinity_namespace_selector_on_namespace_labels(stack: Stack) -> None:
    """Required anti-affinity to app=db pods in namespaces labelled team=data keeps the web pod
    off the node running db in namespace "warehouse" (labelled team=data), though that node has
    room: daiku launches a second node and web runs there (Kubernetes: namespaceSelector is "a
    label query over the set of namespaces", concepts/scheduling-eviction/assign-pod-node;
    Karpenter lists the Namespaces it selects, scheduling/topology.go buildNamespaceList).
    Before daiku watched Namespaces it planned web onto db's node, which localcloud's
    default-scheduler refused, and web stayed Pending."""
    warehouse = {"metadata": {"name": "warehouse", "labels": {"team": "data"}}}
    avoid = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "topologyKey": HOSTNAME,
                    "labelSelector": {"matchLabels": {"app": "db"}},
                    "namespaceSelector": {"matchLabels": {"team": "data"}},
                }
            ]
        }
    }
    await stack.apply_pool(requirements=ON_DEMAND_SMALL)
    async with (
        _deleted_after(stack, "namespaces", warehouse),
        _deleted_after(stack, "pods", _pod("db", "warehouse")),
    ):
        await stack.start_scheduler()
        await until(lambda: _running(stack, "db", "warehouse"), timeout_seconds=30)
        await stack.store.create("pods", _pod("web", affinity=avoid), "default")

        await until(lambda: _running(stack, "web"), timeout_seconds=30)

        db_node = (await _node_of(stack, "db", "warehouse"))["metadata"]["name"]
        assert (await _node_of(stack, "web"))["metadata"]["name"] != db_node
        assert len(await stack.objects("nodeclaims")) == 2


async def test_a_prefer_no_schedule_nodepool_is_avoided(stack: Stack) -> None:
    """Two NodePools of equal weight, "a-tainted" with a PreferNoSchedule taint and "default":
    the pod's node comes from "default" although "a-tainted" sorts first (kubernetes-sigs/
    karpenter scheduling/preferences.go: PreferNoSchedule is tolerated only at the last
    relaxation)."""
    await stack.apply_pool(requirements=ON_DEMAND_SMALL)
    tainted = demo_object("nodepool.yaml")
    tainted["metadata"]["name"] = "a-tainted"
    template = tainted["spec"]["template"]["spec"]
    template["requirements"] = ON_DEMAND_SMALL
    template["taints"] = [{"key": "batch", "value": "true", "effect": "PreferNoSchedule"}]
    await stack.store.create("nodepools", tainted)
    await stack.start_scheduler()
    await stack.store.create("pods", _pod("app"), "default")

    await until(lambda: _running(stack, "app"), timeout_seconds=30)

    (claim,) = await stack.objects("nodeclaims")
    assert claim["metadata"]["labels"]["karpenter.sh/nodepool"] == "default"


async def test_pods_needing_different_extended_resources_get_different_nodes(
    stack: Stack,
) -> None:
    """A GPU pod and a Neuron pod created together each get a node with their device and run
    (kubernetes-sigs/karpenter scheduling/suite_test.go "should launch pods with resources
    that aren't on any single instance type on different instances"); before, both stayed
    Pending."""
    await stack.apply_pool(
        requirements=[
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}
        ]
    )
    await stack.start_scheduler()
    for name, device in (("train", "nvidia.com/gpu"), ("infer", "aws.amazon.com/neuron")):
        pod = _pod(name)
        pod["spec"]["containers"][0]["resources"] = {
            "requests": {"cpu": "100m", device: "1"},
            "limits": {device: "1"},
        }
        await stack.store.create("pods", pod, "default")

    await until(lambda: _running(stack, "train"), timeout_seconds=30)
    await until(lambda: _running(stack, "infer"), timeout_seconds=30)

    train, infer = await _node_of(stack, "train"), await _node_of(stack, "infer")
    assert train["metadata"]["name"] != infer["metadata"]["name"]
    assert int(train["status"]["allocatable"]["nvidia.com/gpu"]) >= 1
    assert int(infer["status"]["allocatable"]["aws.amazon.com/neuron"]) >= 1


async def test_a_zone_id_selector_gets_a_node_in_that_zone_labelled_with_it(stack: Stack) -> None:
    """nodeSelector topology.k8s.aws/zone-id gets a node in the zone with that id, and the node
    carries the label (the id from the EC2NodeClass's resolved subnets), so the pod runs there
    (aws/karpenter-provider-aws test/suites/scheduling "should support well-known labels for
    zone id selection"; pkg/cloudprovider/suite_test.go "should return availability zone ID as
    a label on the nodeClaim"). Before, the selector was ignored in planning and no node had
    the label: the pod stayed Pending."""
    zones = stack.ec2_client().describe_availability_zones()["AvailabilityZones"]
    wanted = sorted(zones, key=lambda z: z["ZoneName"])[2]
    await stack.apply_pool(requirements=ON_DEMAND_SMALL)
    await stack.start_scheduler()
    selector = {"topology.k8s.aws/zone-id": wanted["ZoneId"]}
    await stack.store.create("pods", _pod("pinned", nodeSelector=selector), "default")

    await until(lambda: _running(stack, "pinned"), timeout_seconds=30)

    labels = (await _node_of(stack, "pinned"))["metadata"]["labels"]
    assert (labels[ZONE], labels["topology.k8s.aws/zone-id"]) == (
        wanted["ZoneName"],
        wanted["ZoneId"],
    )
