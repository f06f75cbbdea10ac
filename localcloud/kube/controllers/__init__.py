"""The control-plane behaviours of localcloud's Kubernetes: they make the local cluster move.

Each behaviour runs in the API server's process, reads and writes the same `Store` the HTTP
layer serves (so kubectl and daiku see their effects at once), is driven by store watches,
and can be left out for tests that want a still cluster.

- `ControlPlane` (control_plane.py): all of them, each switchable, as one async context.
- `DefaultScheduler` (scheduler.py): kube-scheduler's stand-in; its pod and volume filters are
  in scheduler_pod_rules.py, its status and Event writes in scheduler_writes.py.
- `Kubelets` (kubelets.py): a Node and a kubelet for every EC2 instance of the cluster; the
  Node they register is built in kubelet_nodes.py, their pods run in kubelet_pods.py.
- `DeploymentController`, `ReplicaSetController` (workloads.py), `DaemonSetController`
  (daemonsets.py), `NodeLifecycleController` (node_lifecycle.py). Garbage collection by
  ownerReferences is the store's own.
"""

from localcloud.kube.controllers.control_plane import ControlPlane, ControlPlaneSettings
from localcloud.kube.controllers.daemonsets import DaemonSetController
from localcloud.kube.controllers.kubelets import Kubelets
from localcloud.kube.controllers.node_lifecycle import NodeLifecycleController
from localcloud.kube.controllers.scheduler import DefaultScheduler
from localcloud.kube.controllers.workloads import DeploymentController, ReplicaSetController

__all__ = [
    "ControlPlane",
    "ControlPlaneSettings",
    "DaemonSetController",
    "DefaultScheduler",
    "DeploymentController",
    "Kubelets",
    "NodeLifecycleController",
    "ReplicaSetController",
]
