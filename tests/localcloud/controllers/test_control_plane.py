"""ControlPlane switches: a behaviour that is off leaves the cluster still."""

from __future__ import annotations

from localcloud.kube.controllers import ControlPlane, ControlPlaneSettings
from localcloud.kube.store import Store
from tests.localcloud.controllers.conftest import node, node_of, pod
from tests.localcloud.controllers.test_workloads import deployment
from tests.polling import until


async def test_without_scheduler_pods_stay_pending_while_controllers_run() -> None:
    """With the scheduler off, a Deployment still gets its pods but none is bound or marked."""
    store = Store()
    await store.create("nodes", node("n1"))
    settings = ControlPlaneSettings(scheduler=False, kubelets=False)
    async with ControlPlane(store, settings=settings) as plane:
        assert plane.scheduler is None
        await store.create("deployments", deployment("web", 2), "default")

        async def two_pods() -> bool:
            return len((await store.list("pods", "default")).items) == 2

        await until(two_pods)
        for item in (await store.list("pods", "default")).items:
            assert not item["spec"].get("nodeName")
            assert "conditions" not in item["status"]


async def test_without_controllers_a_deployment_gets_nothing_but_pods_are_scheduled() -> None:
    """With the controllers off, a Deployment gets no ReplicaSet, yet a bare pod is bound."""
    store = Store()
    await store.create("nodes", node("n1"))
    settings = ControlPlaneSettings(controllers=False, kubelets=False)
    async with ControlPlane(store, settings=settings) as plane:
        assert plane.deployments is None
        await store.create("deployments", deployment("web", 2), "default")
        await store.create("pods", pod("bare"), "default")
        assert await until(lambda: node_of(store, "bare")) == "n1"
        # the Deployment came first: a deployment controller would have acted by now
        assert not (await store.list("replicasets", "default")).items


async def test_kubelets_are_off_without_an_ec2_source() -> None:
    """Kubelets need an EC2 endpoint or an emulator; without either they are left out."""
    async with ControlPlane(Store()) as plane:
        assert plane.kubelets is None
