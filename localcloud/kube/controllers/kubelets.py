"""`Kubelets`: a kubelet for every EC2 instance the emulator runs for this cluster.

Every `poll_seconds` it lists the cluster's instances (tagged `daiku.dev/cluster=<cluster>` or
`kubernetes.io/cluster/<cluster>`): over the EC2 API at `ec2_endpoint_url` (DescribeInstances,
DescribeInstanceAttribute userData), or straight from an in-process `emulator` (what
`LocalCloud` does: moto renders only ~200 instances a second over HTTP). See instances.py.
As a fleet of real kubelets would, for each pending or running instance it:

- registers a Node named after the instance's private DNS name (`ip-10-0-1-23.ec2.internal`,
  the instance id when there is none) with providerID `aws:///<zone>/<instance-id>`, the
  instance type's labels (the actuator core's catalog), zone, region, capacity type
  (`karpenter.sh/capacity-type` from the instance lifecycle), hostname, and the labels, taints
  and maxPods its user data asks for (`read_node_registration`, nodeadm's NodeConfig); its
  capacity and allocatable follow the EKS AMI defaults (actuator core `allocatable`);
- reports NotReady (tainted `node.kubernetes.io/not-ready:NoSchedule`) until `boot_seconds`
  have passed, then Ready; renews its Lease in kube-node-lease every `lease_renew_seconds`;
- runs the pods bound to it once Ready (Pending -> Running with container statuses, a pod IP
  and the Ready condition, which `spec.readinessGates` hold False until their conditions are
  True; see pod_readiness.py) and removes, with grace 0, its pods being deleted gracefully once
  their containers have had `container_stop_seconds` to stop;
- when the instance's status checks fail (the emulator's `impair_instance`, DescribeInstanceStatus
  `impaired`): stops posting status, as a hung kubelet or a dead host does — its Node's
  conditions go Unknown, its Lease is no longer renewed, its pods neither start nor finish
  terminating; it comes back Ready once the instance is no longer impaired;
- when the instance shuts down or goes away: reports the node NotReady (Unknown, as a node
  controller does for a silent kubelet) and deletes the Node; its pods then go away through the
  node lifecycle controller. A Node deleted while its instance still runs registers again, as a
  real kubelet does.

The Node is built in kubelet_nodes.py and the pods are run by kubelet_pods.py; this module
keeps the instances, the Nodes' lifecycle and the Leases.

Delays use the event loop's clock (fast-forwarded in tests with looptime).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Final

import structlog

from actuator_svc.core.catalog import InstanceTypeDataError
from localcloud.ec2 import Ec2Emulator
from localcloud.kube.controllers.informer import Informer, resource_types
from localcloud.kube.controllers.instances import (
    ClusterInstance,
    EmulatorInstances,
    HttpInstances,
    InstanceSource,
)
from localcloud.kube.controllers.kubelet_nodes import (
    CAPACITY_TYPE_LABEL,
    KUBELET_VERSION,
    node_conditions,
    node_for,
)
from localcloud.kube.controllers.kubelet_pods import Kubelet, KubeletPods, log_task_failure
from localcloud.kube.controllers.pod_fit import NOT_READY_TAINT
from localcloud.kube.errors import AlreadyExists, ApiError, NotFound
from localcloud.kube.store import DELETED, Store, copy_json, format_timestamp

JsonObject = dict[str, Any]
NODE_LEASE_NAMESPACE: Final = "kube-node-lease"
LEASE_DURATION_SECONDS: Final = 40
_LIVE_STATES: Final = frozenset({"pending", "running"})
_TERMINAL_PHASES: Final = ("Succeeded", "Failed")

log = structlog.get_logger("localcloud.kube.controllers.kubelets")


def _now() -> datetime:
    return datetime.now(UTC)


class Kubelets:
    """Nodes for the cluster's instances and their pods; see the module docstring."""

    def __init__(
        self,
        store: Store,
        *,
        ec2_endpoint_url: str | None = None,
        emulator: Ec2Emulator | None = None,
        region: str = "us-east-1",
        cluster_name: str = "daiku",
        boot_seconds: float = 5.0,
        poll_seconds: float = 1.0,
        container_stop_seconds: float = 0.0,
        lease_renew_seconds: float = 10.0,
        clock: Callable[[], datetime] = _now,
    ) -> None:
        self.store = store
        self._rt = resource_types(store)
        if emulator is None and ec2_endpoint_url is None:
            raise ValueError("Kubelets need ec2_endpoint_url (HTTP) or emulator (in process)")
        self.ec2_endpoint_url = ec2_endpoint_url
        self.emulator = emulator
        self.region = region
        self.cluster_name = cluster_name
        self.boot_seconds = boot_seconds
        self.poll_seconds = poll_seconds
        self.lease_renew_seconds = lease_renew_seconds
        self.clock = clock
        self._kubelets: dict[str, Kubelet] = {}  # by instance id
        self._by_node: dict[str, Kubelet] = {}
        self._pods = KubeletPods(
            store,
            self._by_node.get,
            container_stop_seconds=container_stop_seconds,
            clock=clock,
        )
        self.pods = self._pods.informer
        self.nodes = Informer(store, "nodes", self._on_node)

    # ------------------------------------------------------------------ run

    def _source(self) -> InstanceSource:
        if self.emulator is not None:
            return EmulatorInstances(self.emulator, cluster_name=self.cluster_name)
        assert self.ec2_endpoint_url is not None
        return HttpInstances(
            self.ec2_endpoint_url, region=self.region, cluster_name=self.cluster_name
        )

    async def run(self) -> None:
        self.nodes.start()
        self.pods.start()
        async with self._source() as source:
            try:
                async with asyncio.TaskGroup() as tasks:
                    tasks.create_task(self.nodes.run())
                    tasks.create_task(self.pods.run())
                    tasks.create_task(self._pods.run())
                    tasks.create_task(self._renew_leases())
                    tasks.create_task(self._poll_forever(source))
            finally:
                for kubelet in self._kubelets.values():
                    for timer in kubelet.timers:
                        timer.cancel()

    async def _poll_forever(self, source: InstanceSource) -> None:
        loop = asyncio.get_running_loop()
        while True:
            started = loop.time()
            try:
                await self.sync_instances(source, started)
            except Exception as error:  # the emulator may be restarting; try again next poll
                log.warning("instance_poll_failed", error=str(error))
            # a slow listing (many instances over HTTP) spaces polls out rather than
            # keeping the emulator busy all the time
            await asyncio.sleep(max(self.poll_seconds, loop.time() - started))

    # ------------------------------------------------------------------ instances -> nodes

    async def sync_instances(self, source: InstanceSource, poll_started: float) -> None:
        """One poll: register new instances, retire gone ones."""
        instances = await source.instances()
        for index, (instance_id, instance) in enumerate(sorted(instances.items())):
            if index % 64 == 63:
                await asyncio.sleep(0)
            kubelet = self._kubelets.get(instance_id)
            if instance.state in _LIVE_STATES:
                if kubelet is None:
                    await self._register(source, instance)
                elif kubelet.registered and kubelet.silent != instance.impaired:
                    await self._set_silent(kubelet, silent=instance.impaired)
                elif not kubelet.registered and (
                    kubelet.deleted_at is None or kubelet.deleted_at < poll_started
                ):
                    await self._reregister(kubelet)
                elif (
                    instance.state == "running"
                    and kubelet.registered
                    and not kubelet.ready
                    and not kubelet.silent
                ):
                    self._schedule_ready(kubelet)
            elif kubelet is not None:
                await self._retire(kubelet, f"instance {instance.state}")
        for instance_id in [i for i in self._kubelets if i not in instances]:
            await self._retire(self._kubelets[instance_id], "instance terminated")

    async def _register(self, source: InstanceSource, instance: ClusterInstance) -> None:
        instance_id = instance.instance_id
        try:
            user_data = await source.user_data(instance_id)
            root_volume = await source.root_volume_bytes(instance_id)
            node = node_for(instance, user_data, root_volume, region=self.region, now=self._stamp())
        except (InstanceTypeDataError, KeyError, ValueError) as error:
            log.warning("node_registration_failed", instance_id=instance_id, error=str(error))
            return
        kubelet = Kubelet(instance_id=instance_id, node_name=node["metadata"]["name"], node=node)
        self._kubelets[instance_id] = kubelet
        self._by_node[kubelet.node_name] = kubelet
        await self._reregister(kubelet)

    async def _reregister(self, kubelet: Kubelet) -> None:
        node = copy_json(kubelet.node)
        try:
            await self.store.create(self._rt["nodes"], node)
        except AlreadyExists:
            log.info("node_adopted", node=kubelet.node_name, instance_id=kubelet.instance_id)
        except ApiError as error:
            log.warning("node_create_failed", node=kubelet.node_name, error=str(error))
            return
        kubelet.registered = True
        kubelet.deleted_at = None
        kubelet.ready = False
        log.info("node_registered", node=kubelet.node_name, instance_id=kubelet.instance_id)
        await self._write_lease(kubelet)
        self._schedule_ready(kubelet)

    def _schedule_ready(self, kubelet: Kubelet) -> None:
        if kubelet.timers:
            return
        loop = asyncio.get_running_loop()

        def fire() -> None:
            kubelet.timers.clear()
            task = loop.create_task(self._become_ready(kubelet))
            task.add_done_callback(log_task_failure)

        kubelet.timers.append(loop.call_later(max(0.0, self.boot_seconds), fire))

    async def _become_ready(self, kubelet: Kubelet) -> None:
        if (
            not kubelet.registered
            or kubelet.silent
            or self._kubelets.get(kubelet.instance_id) is not kubelet
        ):
            return
        current = self.store.get_nowait(self._rt["nodes"], kubelet.node_name)
        if current is None:
            return
        new = copy_json(current)
        new["spec"]["taints"] = [
            t for t in new["spec"].get("taints") or [] if t.get("key") != NOT_READY_TAINT
        ]
        if not new["spec"]["taints"]:
            del new["spec"]["taints"]
        try:
            updated = await self.store.update(self._rt["nodes"], new)
            updated["status"]["conditions"] = node_conditions(ready=True, now=self._stamp())
            await self.store.update(self._rt["nodes"], updated, subresource="status")
        except ApiError as error:
            log.warning("node_ready_failed", node=kubelet.node_name, error=str(error))
            return
        kubelet.ready = True
        log.info("node_ready", node=kubelet.node_name, instance_id=kubelet.instance_id)
        self._pods.node_ready(kubelet.node_name)

    async def _set_silent(self, kubelet: Kubelet, *, silent: bool) -> None:
        """An impaired instance's kubelet stops: no lease, no pod changes, and its Node's
        conditions go Unknown ("Kubelet stopped posting node status.", stamped now: what the
        node lifecycle controller writes after its grace period). Unimpaired, it comes back
        Ready."""
        kubelet.silent = silent
        if not silent:
            log.info("kubelet_posting_again", node=kubelet.node_name)
            self._schedule_ready(kubelet)
            return
        for timer in kubelet.timers:
            timer.cancel()
        kubelet.timers.clear()
        kubelet.ready = False
        current = self.store.get_nowait(self._rt["nodes"], kubelet.node_name)
        if current is not None:
            new = copy_json(current)
            new.setdefault("status", {})["conditions"] = node_conditions(
                ready=None, now=self._stamp()
            )
            try:
                await self.store.update(self._rt["nodes"], new, subresource="status")
            except ApiError as error:
                log.warning("node_status_unknown_failed", node=kubelet.node_name, error=str(error))
        log.info("kubelet_stopped_posting", node=kubelet.node_name, instance_id=kubelet.instance_id)

    async def _retire(self, kubelet: Kubelet, why: str) -> None:
        for timer in kubelet.timers:
            timer.cancel()
        kubelet.timers.clear()
        del self._kubelets[kubelet.instance_id]
        if self._by_node.get(kubelet.node_name) is kubelet:
            del self._by_node[kubelet.node_name]
        current = self.store.get_nowait(self._rt["nodes"], kubelet.node_name)
        if current is not None:
            new = copy_json(current)
            new.setdefault("status", {})["conditions"] = node_conditions(
                ready=None, now=self._stamp()
            )
            with contextlib.suppress(ApiError):
                await self.store.update(self._rt["nodes"], new, subresource="status")
            with contextlib.suppress(NotFound):
                await self.store.delete(self._rt["nodes"], kubelet.node_name)
        with contextlib.suppress(NotFound):
            await self.store.delete(self._rt["leases"], kubelet.node_name, NODE_LEASE_NAMESPACE)
        log.info("node_retired", node=kubelet.node_name, instance_id=kubelet.instance_id, why=why)

    # ------------------------------------------------------------------ leases

    async def _write_lease(self, kubelet: Kubelet) -> None:
        now = self.clock().astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        spec = {
            "holderIdentity": kubelet.node_name,
            "leaseDurationSeconds": LEASE_DURATION_SECONDS,
            "renewTime": now,
        }
        current = self.store.get_nowait(self._rt["leases"], kubelet.node_name, NODE_LEASE_NAMESPACE)
        try:
            if current is None:
                await self.store.create(
                    self._rt["leases"],
                    {"metadata": {"name": kubelet.node_name}, "spec": spec},
                    NODE_LEASE_NAMESPACE,
                )
            else:
                await self.store.update(
                    self._rt["leases"], {**current, "spec": spec}, NODE_LEASE_NAMESPACE
                )
        except ApiError as error:
            log.info("lease_write_failed", node=kubelet.node_name, error=str(error))

    async def _renew_leases(self) -> None:
        while True:
            await asyncio.sleep(self.lease_renew_seconds)
            for index, kubelet in enumerate(list(self._kubelets.values())):
                if index % 64 == 63:
                    await asyncio.sleep(0)  # a thousand renewals must not stall the API server
                if kubelet.registered and not kubelet.silent:
                    await self._write_lease(kubelet)

    # ------------------------------------------------------------------ nodes

    def _on_node(self, kind: str, node: JsonObject, previous: JsonObject | None) -> None:
        if kind != DELETED:
            return
        kubelet = self._by_node.get(node["metadata"]["name"])
        if kubelet is not None and kubelet.registered:
            kubelet.registered = False
            kubelet.ready = False
            kubelet.deleted_at = asyncio.get_running_loop().time()
            for timer in kubelet.timers:
                timer.cancel()
            kubelet.timers.clear()

    def _stamp(self) -> str:
        return format_timestamp(self.clock())


__all__ = ["CAPACITY_TYPE_LABEL", "KUBELET_VERSION", "Kubelets"]
