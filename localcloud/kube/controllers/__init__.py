"""The control-plane behaviours of localcloud's Kubernetes: they make the local cluster move.

Each behaviour runs in the API server's process, reads and writes the same `Store` the HTTP
layer serves (so kubectl and daiku see their effects at once), is driven by store watches,
and can be left out for tests that want a still cluster.

- `DefaultScheduler` (scheduler.py): kube-scheduler's stand-in.
- `Kubelets` (kubelets.py): a Node and a kubelet for every EC2 instance of the cluster.
"""

from localcloud.kube.controllers.kubelets import Kubelets
from localcloud.kube.controllers.scheduler import DefaultScheduler

__all__ = ["DefaultScheduler", "Kubelets"]
