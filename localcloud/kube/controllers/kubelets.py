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

Delays use the event loop's clock (fast-forwarded in tests with looptime).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email import message_from_string
from email.message import Message
from typing import Any, Final

import structlog

from actuator_svc.core.allocatable import (
    DEFAULT_ROOT_VOLUME_BYTES,
    KubeletSettings,
    NodeResources,
    allocatable,
    capacity,
)
from actuator_svc.core.catalog import InstanceTypeDataError, labels_of, shape_of
from actuator_svc.core.user_data import (
    NODECONFIG_CONTENT_TYPE,
    NodeRegistration,
    read_node_registration,
)
from localcloud.ec2 import Ec2Emulator
from localcloud.ec2.instance_types import describe_instance_types
from localcloud.kube.controllers.informer import (
    Informer,
    ObjectKey,
    PodsByNode,
    object_key,
    resource_types,
)
from localcloud.kube.controllers.instances import (
    ClusterInstance,
    EmulatorInstances,
    HttpInstances,
    InstanceSource,
)
from localcloud.kube.controllers.pod_fit import NOT_READY_TAINT
from localcloud.kube.controllers.pod_readiness import running_conditions, with_ready_refreshed
from localcloud.kube.errors import AlreadyExists, ApiError, NotFound
from localcloud.kube.store import DELETED, Store, copy_json, format_timestamp

JsonObject = dict[str, Any]
CAPACITY_TYPE_LABEL: Final = "karpenter.sh/capacity-type"
KUBELET_VERSION: Final = "v1.32.0-eks-localcloud"
NODE_LEASE_NAMESPACE: Final = "kube-node-lease"
LEASE_DURATION_SECONDS: Final = 40
_LIVE_STATES: Final = frozenset({"pending", "running"})
_TERMINAL_PHASES: Final = ("Succeeded", "Failed")

log = structlog.get_logger("localcloud.kube.controllers.kubelets")


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass(slots=True)
class _Kubelet:
    """One instance's kubelet."""

    instance_id: str
    node_name: str
    node: JsonObject
    ready: bool = False
    registered: bool = False
    deleted_at: float | None = None
    silent: bool = False  # its instance is impaired: it posts no status and runs nothing
    pod_ip_counter: int = 0
    timers: list[asyncio.TimerHandle] = field(default_factory=list)


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
        self.container_stop_seconds = container_stop_seconds
        self.lease_renew_seconds = lease_renew_seconds
        self.clock = clock
        self._kubelets: dict[str, _Kubelet] = {}  # by instance id
        self._by_node: dict[str, _Kubelet] = {}
        self._pods = PodsByNode()
        self._work: dict[ObjectKey, None] = {}
        self._work_ready = asyncio.Event()
        self._stopping: set[ObjectKey] = set()
        self.pods = Informer(store, "pods", self._on_pod)
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
                    tasks.create_task(self._run_pods())
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
            node = self._node_for(instance, user_data, root_volume)
        except (InstanceTypeDataError, KeyError, ValueError) as error:
            log.warning("node_registration_failed", instance_id=instance_id, error=str(error))
            return
        kubelet = _Kubelet(instance_id=instance_id, node_name=node["metadata"]["name"], node=node)
        self._kubelets[instance_id] = kubelet
        self._by_node[kubelet.node_name] = kubelet
        await self._reregister(kubelet)

    async def _reregister(self, kubelet: _Kubelet) -> None:
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

    def _schedule_ready(self, kubelet: _Kubelet) -> None:
        if kubelet.timers:
            return
        loop = asyncio.get_running_loop()

        def fire() -> None:
            kubelet.timers.clear()
            task = loop.create_task(self._become_ready(kubelet))
            task.add_done_callback(_log_failure)

        kubelet.timers.append(loop.call_later(max(0.0, self.boot_seconds), fire))

    async def _become_ready(self, kubelet: _Kubelet) -> None:
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
            updated["status"]["conditions"] = _node_conditions(ready=True, now=self._stamp())
            await self.store.update(self._rt["nodes"], updated, subresource="status")
        except ApiError as error:
            log.warning("node_ready_failed", node=kubelet.node_name, error=str(error))
            return
        kubelet.ready = True
        log.info("node_ready", node=kubelet.node_name, instance_id=kubelet.instance_id)
        for key in self._pods.on(kubelet.node_name):
            self._enqueue(key)

    async def _set_silent(self, kubelet: _Kubelet, *, silent: bool) -> None:
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
            new.setdefault("status", {})["conditions"] = _node_conditions(
                ready=None, now=self._stamp()
            )
            try:
                await self.store.update(self._rt["nodes"], new, subresource="status")
            except ApiError as error:
                log.warning("node_status_unknown_failed", node=kubelet.node_name, error=str(error))
        log.info("kubelet_stopped_posting", node=kubelet.node_name, instance_id=kubelet.instance_id)

    async def _retire(self, kubelet: _Kubelet, why: str) -> None:
        for timer in kubelet.timers:
            timer.cancel()
        kubelet.timers.clear()
        del self._kubelets[kubelet.instance_id]
        if self._by_node.get(kubelet.node_name) is kubelet:
            del self._by_node[kubelet.node_name]
        current = self.store.get_nowait(self._rt["nodes"], kubelet.node_name)
        if current is not None:
            new = copy_json(current)
            new.setdefault("status", {})["conditions"] = _node_conditions(
                ready=None, now=self._stamp()
            )
            with contextlib.suppress(ApiError):
                await self.store.update(self._rt["nodes"], new, subresource="status")
            with contextlib.suppress(NotFound):
                await self.store.delete(self._rt["nodes"], kubelet.node_name)
        with contextlib.suppress(NotFound):
            await self.store.delete(self._rt["leases"], kubelet.node_name, NODE_LEASE_NAMESPACE)
        log.info("node_retired", node=kubelet.node_name, instance_id=kubelet.instance_id, why=why)

    def _node_for(
        self, instance: ClusterInstance, user_data: str, root_volume_bytes: int = 0
    ) -> JsonObject:
        instance_id = instance.instance_id
        instance_type = instance.instance_type
        zone = instance.zone
        name = instance.private_dns_name or instance_id
        description = describe_instance_types().get(instance_type)
        if description is None:
            raise InstanceTypeDataError(f"{instance_id}: unknown instance type {instance_type}")
        registration = read_node_registration(user_data) if user_data else NodeRegistration({}, ())
        kubelet_settings = KubeletSettings(max_pods=_max_pods(user_data))
        # The kubelet's ephemeral-storage is its root volume (the AMI's default when the launch
        # mapped none at the root device).
        root_volume = root_volume_bytes or DEFAULT_ROOT_VOLUME_BYTES
        shape = shape_of(description)
        type_labels = labels_of(description)
        capacity_type = "spot" if instance.spot else "on-demand"
        labels = {
            **type_labels,
            "beta.kubernetes.io/arch": type_labels["kubernetes.io/arch"],
            "beta.kubernetes.io/os": type_labels["kubernetes.io/os"],
            "beta.kubernetes.io/instance-type": instance_type,
            "kubernetes.io/hostname": name,
            "topology.kubernetes.io/zone": zone,
            "topology.kubernetes.io/region": self.region,
            "failure-domain.beta.kubernetes.io/zone": zone,
            "failure-domain.beta.kubernetes.io/region": self.region,
            CAPACITY_TYPE_LABEL: capacity_type,
            **registration.labels,
        }
        taints = [
            {"key": t.key, "value": t.value, "effect": t.effect}
            if t.value
            else {"key": t.key, "effect": t.effect}
            for t in registration.taints
        ]
        taints.append({"key": NOT_READY_TAINT, "effect": "NoSchedule"})
        private_ip = instance.private_ip
        addresses = [{"type": "InternalIP", "address": private_ip}] if private_ip else []
        addresses += [
            {"type": "InternalDNS", "address": name},
            {"type": "Hostname", "address": name},
        ]
        return {
            "metadata": {"name": name, "labels": labels},
            "spec": {"providerID": f"aws:///{zone}/{instance_id}", "taints": taints},
            "status": {
                "capacity": _resource_list(
                    capacity(shape, kubelet_settings, root_volume), allocatable=False
                ),
                "allocatable": _resource_list(
                    allocatable(shape, kubelet_settings, root_volume), allocatable=True
                ),
                "conditions": _node_conditions(ready=False, now=self._stamp()),
                "addresses": addresses,
                "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                "nodeInfo": {
                    "machineID": instance_id,
                    "systemUUID": instance_id,
                    "bootID": secrets.token_hex(16),
                    "kernelVersion": "6.1.0-localcloud",
                    "osImage": "Amazon Linux 2023 (localcloud)",
                    "containerRuntimeVersion": "containerd://1.7.0",
                    "kubeletVersion": KUBELET_VERSION,
                    "kubeProxyVersion": KUBELET_VERSION,
                    "operatingSystem": "linux",
                    "architecture": type_labels["kubernetes.io/arch"],
                },
            },
        }

    # ------------------------------------------------------------------ leases

    async def _write_lease(self, kubelet: _Kubelet) -> None:
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

    # ------------------------------------------------------------------ nodes and pods

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

    def _on_pod(self, kind: str, pod: JsonObject, previous: JsonObject | None) -> None:
        key = object_key(pod)
        _, node_name = self._pods.observe(kind, pod)
        if kind == DELETED:
            self._work.pop(key, None)
            return
        if node_name is None:
            return
        kubelet = self._by_node.get(node_name)
        if kubelet is not None and kubelet.registered:
            self._enqueue(key)

    def _enqueue(self, key: ObjectKey) -> None:
        self._work[key] = None
        self._work_ready.set()

    async def _run_pods(self) -> None:
        while True:
            await self._work_ready.wait()
            self._work_ready.clear()
            keys = list(self._work)
            self._work.clear()
            for index, key in enumerate(keys):
                if index % 64 == 63:
                    await asyncio.sleep(0)
                try:
                    await self._sync_pod(key)
                except Exception:  # one bad pod must not stop the kubelets
                    log.exception("pod_sync_failed", pod=f"{key[0]}/{key[1]}")

    async def _sync_pod(self, key: ObjectKey) -> None:
        pod = self.pods.cache.get(key)
        if pod is None:
            return
        node_name = (pod.get("spec") or {}).get("nodeName")
        kubelet = self._by_node.get(node_name or "")
        if kubelet is None or not kubelet.registered or kubelet.silent:
            return
        if pod["metadata"].get("deletionTimestamp"):
            if key not in self._stopping:
                self._stopping.add(key)
                task = asyncio.get_running_loop().create_task(self._stop_pod(key, pod))
                task.add_done_callback(_log_failure)
            return
        phase = (pod.get("status") or {}).get("phase")
        if kubelet.ready and phase == "Pending":
            await self._start_pod(kubelet, key, pod)
        elif phase == "Running" and (pod.get("spec") or {}).get("readinessGates"):
            await self._refresh_readiness(key, pod)

    async def _stop_pod(self, key: ObjectKey, pod: JsonObject) -> None:
        try:
            if self.container_stop_seconds > 0:
                await asyncio.sleep(self.container_stop_seconds)
            current = self.pods.cache.get(key)
            if current is None or current["metadata"]["uid"] != pod["metadata"]["uid"]:
                return
            await self.store.delete(
                self._rt["pods"],
                key[1],
                key[0],
                grace_period_seconds=0,
                preconditions={"uid": pod["metadata"]["uid"]},
            )
            log.debug("pod_stopped", pod=f"{key[0]}/{key[1]}")
        except ApiError as error:
            log.info("pod_stop_failed", pod=f"{key[0]}/{key[1]}", error=str(error))
        finally:
            self._stopping.discard(key)

    async def _start_pod(self, kubelet: _Kubelet, key: ObjectKey, pod: JsonObject) -> None:
        now = self._stamp()
        kubelet.pod_ip_counter += 1
        host_ip = next(
            (
                a["address"]
                for a in kubelet.node["status"]["addresses"]
                if a["type"] == "InternalIP"
            ),
            "10.0.0.1",
        )
        pod_ip = _pod_ip(host_ip, kubelet.pod_ip_counter)
        spec = pod.get("spec") or {}
        new = copy_json(pod)
        status = new.setdefault("status", {})
        status.update(
            {
                "phase": "Running",
                "hostIP": host_ip,
                "hostIPs": [{"ip": host_ip}],
                "podIP": pod_ip,
                "podIPs": [{"ip": pod_ip}],
                "startTime": now,
                "conditions": running_conditions(pod, now),
                "containerStatuses": [
                    {
                        "name": container.get("name", ""),
                        "image": container.get("image", ""),
                        "imageID": f"{container.get('image', '')}@sha256:{secrets.token_hex(32)}",
                        "containerID": f"containerd://{secrets.token_hex(32)}",
                        "ready": True,
                        "started": True,
                        "restartCount": 0,
                        "state": {"running": {"startedAt": now}},
                        "lastState": {},
                    }
                    for container in spec.get("containers") or []
                ],
            }
        )
        try:
            await self.store.update(self._rt["pods"], new, key[0], subresource="status")
        except ApiError as error:
            log.info("pod_start_failed", pod=f"{key[0]}/{key[1]}", error=str(error))
            return
        log.debug("pod_running", pod=f"{key[0]}/{key[1]}", node=kubelet.node_name)

    async def _refresh_readiness(self, key: ObjectKey, pod: JsonObject) -> None:
        """Recompute Ready from the pod's readiness gates, which others set in its status."""
        conditions = with_ready_refreshed(pod, self._stamp())
        if conditions is None:
            return
        new = copy_json(pod)
        new["status"]["conditions"] = conditions
        try:  # a conflict means a newer pod, whose own event brings it back here
            await self.store.update(self._rt["pods"], new, key[0], subresource="status")
        except ApiError as error:
            log.info("pod_readiness_failed", pod=f"{key[0]}/{key[1]}", error=str(error))

    def _stamp(self) -> str:
        return format_timestamp(self.clock())


def _log_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("kubelet_task_failed", error=repr(task.exception()))


def _pod_ip(host_ip: str, counter: int) -> str:
    """A pod IP near its node's, as the VPC CNI hands out secondary addresses of the subnet."""
    parts = host_ip.split(".")
    if len(parts) != 4:
        parts = ["10", "0", "0", "1"]
    third = (int(parts[2]) + 1 + counter // 250) % 256
    return f"{parts[0]}.{parts[1]}.{third}.{counter % 250 + 2}"


def _node_conditions(*, ready: bool | None, now: str) -> list[JsonObject]:
    """Node conditions: ready True/False, or None for Unknown (the kubelet stopped posting)."""
    if ready is None:
        status, reason, message = (
            "Unknown",
            "NodeStatusUnknown",
            "Kubelet stopped posting node status.",
        )
    elif ready:
        status, reason, message = "True", "KubeletReady", "kubelet is posting ready status"
    else:
        status, reason, message = (
            "False",
            "KubeletNotReady",
            "container runtime network not ready: NetworkReady=false "
            "reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not "
            "initialized",
        )
    pressure = [
        {
            "type": kind,
            "status": "False" if ready is not None else "Unknown",
            "lastHeartbeatTime": now,
            "lastTransitionTime": now,
            "reason": f"KubeletHasSufficient{short}" if ready is not None else "NodeStatusUnknown",
            "message": f"kubelet has sufficient {short.lower()} available"
            if ready is not None
            else "Kubelet stopped posting node status.",
        }
        for kind, short in (
            ("MemoryPressure", "Memory"),
            ("DiskPressure", "Disk"),
            ("PIDPressure", "PID"),
        )
    ]
    return [
        *pressure,
        {
            "type": "Ready",
            "status": status,
            "lastHeartbeatTime": now,
            "lastTransitionTime": now,
            "reason": reason,
            "message": message,
        },
    ]


def _resource_list(resources: NodeResources, *, allocatable: bool) -> dict[str, str]:
    """A node's resource list as the kubelet writes it (memory in Ki; cpu in cores or m)."""
    cpu = resources.cpu_millis
    listing = {
        "cpu": str(cpu // 1000) if cpu % 1000 == 0 else f"{cpu}m",
        "memory": f"{resources.memory_bytes // 1024}Ki",
        "pods": str(resources.pods),
        "ephemeral-storage": (
            str(resources.ephemeral_storage_bytes)
            if allocatable
            else f"{resources.ephemeral_storage_bytes // 1024}Ki"
        ),
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
    }
    for name, amount in resources.extended.items():
        listing[name] = str(amount)
    return listing


def _max_pods(user_data: str) -> int | None:
    """maxPods from the NodeConfig in the user data (nodeadm's kubelet config), if any."""
    if not user_data:
        return None
    message = message_from_string(user_data)
    parts = message.get_payload() if message.is_multipart() else [message]
    found: int | None = None
    for part in parts:
        if not isinstance(part, Message) or part.get_content_type() != NODECONFIG_CONTENT_TYPE:
            continue
        payload = part.get_payload()
        try:
            document = json.loads(payload if isinstance(payload, str) else "")
        except json.JSONDecodeError:
            continue
        value = (((document.get("spec") or {}).get("kubelet") or {}).get("config") or {}).get(
            "maxPods"
        )
        if isinstance(value, int):
            found = value
    return found


__all__ = ["CAPACITY_TYPE_LABEL", "KUBELET_VERSION", "Kubelets"]
