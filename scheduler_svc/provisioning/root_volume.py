"""A growing root volume at the edge (core.root_volume): the size a claim launches with, read
from its class and its own requests, and the reason a pod beyond the cap stays pending."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from scheduler_svc.core.model import Pod, UnschedulablePod
from scheduler_svc.core.nodeclass import KubeletSpec, NodeClassSpec
from scheduler_svc.core.root_volume import RootVolumeGrowth, beyond_cap_reason
from scheduler_svc.kube.convert import kubelet_from_k8s, node_class_from_k8s
from scheduler_svc.kube.resources import KubeObject


def launch_root_volume_bytes(
    node_class: NodeClassSpec, kubelet: KubeletSpec | None, ephemeral_storage_bytes: int
) -> int:
    """The root volume a claim launches with when its class's volume grows (0: the class's
    own size): the smallest that holds what the claim was packed with, its requests."""
    growth = RootVolumeGrowth.of(node_class, kubelet)
    return growth.size_for(ephemeral_storage_bytes) if growth is not None else 0


def with_root_volume_caps(
    unschedulable: Iterable[UnschedulablePod], node_class: KubeObject, pods: Mapping[str, Pod]
) -> dict[str, UnschedulablePod]:
    """The unschedulable pods by key; a pod asking for more ephemeral-storage than the class's
    largest root volume allows gets a reason that names the cap. Raises InvalidObjectError
    (the class was converted when its NodePool was validated, so it does not)."""
    growth = RootVolumeGrowth.of(node_class_from_k8s(node_class), kubelet_from_k8s(node_class))
    name = str((node_class.get("metadata") or {}).get("name", ""))
    out: dict[str, UnschedulablePod] = {}
    for refused in unschedulable:
        pod = pods.get(refused.pod)
        reason = refused.reason
        if growth is not None and pod is not None:
            requested = pod.requests().ephemeral_storage_bytes
            reason = beyond_cap_reason(reason, requested, growth, name)
        out[refused.pod] = UnschedulablePod(refused.pod, reason)
    return out
