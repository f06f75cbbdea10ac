"""The Node a localcloud kubelet registers for an EC2 instance, and the conditions it posts.

Labels from the instance type (the actuator core's catalog), zone, region and capacity type,
plus the labels, taints and maxPods the user data asks for (nodeadm's NodeConfig); capacity and
allocatable follow the EKS AMI defaults (actuator core `allocatable`). See kubelets.py.
"""

from __future__ import annotations

import json
import secrets
from email import message_from_string
from email.message import Message
from typing import Any, Final

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
from localcloud.ec2.instance_types import describe_instance_types
from localcloud.kube.controllers.instances import ClusterInstance
from localcloud.kube.controllers.pod_fit import NOT_READY_TAINT

JsonObject = dict[str, Any]
CAPACITY_TYPE_LABEL: Final = "karpenter.sh/capacity-type"
KUBELET_VERSION: Final = "v1.32.0-eks-localcloud"


def node_for(
    instance: ClusterInstance,
    user_data: str,
    root_volume_bytes: int = 0,
    *,
    region: str,
    now: str,
) -> JsonObject:
    """The Node a kubelet registers for `instance` (NotReady, tainted not-ready)."""
    instance_id = instance.instance_id
    instance_type = instance.instance_type
    zone = instance.zone
    name = instance.private_dns_name or instance_id
    description = describe_instance_types().get(instance_type)
    if description is None:
        raise InstanceTypeDataError(f"{instance_id}: unknown instance type {instance_type}")
    registration = read_node_registration(user_data) if user_data else NodeRegistration({}, ())
    kubelet_settings = KubeletSettings(max_pods=max_pods(user_data))
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
        "topology.kubernetes.io/region": region,
        "failure-domain.beta.kubernetes.io/zone": zone,
        "failure-domain.beta.kubernetes.io/region": region,
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
            "capacity": resource_list(
                capacity(shape, kubelet_settings, root_volume), allocatable=False
            ),
            "allocatable": resource_list(
                allocatable(shape, kubelet_settings, root_volume), allocatable=True
            ),
            "conditions": node_conditions(ready=False, now=now),
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


def node_conditions(*, ready: bool | None, now: str) -> list[JsonObject]:
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


def resource_list(resources: NodeResources, *, allocatable: bool) -> dict[str, str]:
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


def max_pods(user_data: str) -> int | None:
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


__all__ = ["CAPACITY_TYPE_LABEL", "KUBELET_VERSION", "node_conditions", "node_for"]
