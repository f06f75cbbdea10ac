"""Conformance through the kubectl binary (v1.32) against the local API server."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from localcloud.kube.errors import NotFound
from localcloud.kube.server import KubeApiServer
from tests.localcloud.kube.conftest import Kubectl
from tests.polling import until

READY = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}


async def add_node(kube: KubeApiServer, name: str) -> None:
    await kube.store.create(
        "nodes",
        {
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {
                "conditions": [{"type": "Ready", "status": "True"}],
                "addresses": [{"type": "InternalIP", "address": "10.0.0.7"}],
                "nodeInfo": {"kubeletVersion": "v1.32.0"},
            },
        },
    )


async def add_running_pod(
    kube: KubeApiServer,
    name: str,
    node: str,
    labels: dict[str, str],
    owner: dict[str, Any] | None = None,
) -> None:
    body: dict[str, Any] = {
        "metadata": {"name": name, "labels": labels},
        "spec": {"nodeName": node, "containers": [{"name": "app", "image": "nginx"}]},
    }
    if owner:
        body["metadata"]["ownerReferences"] = [owner]
    await kube.store.create("pods", body, "default")
    await kube.store.patch(
        "pods", name, {"status": READY}, namespace="default", subresource="status"
    )


@contextlib.asynccontextmanager
async def kubelet_finishing_deletions(kube: KubeApiServer) -> AsyncIterator[None]:
    """Stand in for kubelets: a pod marked for graceful deletion is then deleted for good."""

    async def run() -> None:
        async for kind, pod in kube.store.watch("pods", since_rv=kube.store.resource_version):
            meta = pod["metadata"]
            if kind == "MODIFIED" and meta.get("deletionTimestamp"):
                with contextlib.suppress(Exception):
                    await kube.store.delete(
                        "pods", meta["name"], meta["namespace"], grace_period_seconds=0
                    )

    task = asyncio.create_task(run())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_get_wide_and_describe(kube: KubeApiServer, kubectl: Kubectl) -> None:
    """kubectl get (plain and -o wide) prints the server's table columns; describe prints a pod."""
    await add_node(kube, "n1")
    await add_running_pod(kube, "web-1", "n1", {"app": "web"})
    pods = (await kubectl("get", "pods")).stdout.splitlines()
    assert pods[0].split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert pods[1].split()[:3] == ["web-1", "0/1", "Running"]
    wide = (await kubectl("get", "pods", "-o", "wide")).stdout.splitlines()
    assert "NODE" in wide[0].split()
    assert "n1" in wide[1].split()
    nodes = (await kubectl("get", "nodes", "-o", "wide")).stdout.splitlines()
    assert nodes[1].split()[:2] == ["n1", "Ready"]
    assert "10.0.0.7" in nodes[1].split()
    web = await kube.store.get("pods", "web-1", "default")
    await kube.store.create(
        "events.k8s.io/v1/events",
        {
            "metadata": {"name": "web-1.nominated"},
            "regarding": {
                "kind": "Pod",
                "name": "web-1",
                "namespace": "default",
                "uid": web["metadata"]["uid"],
            },
            "reason": "Nominated",
            "note": "Pod should schedule on n1",
            "type": "Normal",
            "action": "Nominate",
            "reportingController": "daiku.dev/scheduler",
            "reportingInstance": "s-1",
            "eventTime": "2026-01-01T00:00:00.000000Z",
        },
        "default",
    )
    described = (await kubectl("describe", "pod", "web-1")).stdout
    assert "Pod should schedule on n1" in described
    assert "Node:" in described
    assert "n1/" in described or "n1" in described
    assert "app=web" in described


async def test_create_apply_delete(kube: KubeApiServer, kubectl: Kubectl, tmp_path: Path) -> None:
    """create -f, apply (create then configure) and delete change the stored objects."""
    manifest = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "containers": [
                        {"name": "app", "image": "nginx:1"},
                        {"name": "log", "image": "busybox"},
                    ]
                },
            },
        },
    }
    path = tmp_path / "deploy.json"
    path.write_text(json.dumps(manifest))
    dry = await kubectl("apply", "--dry-run=server", "-f", str(path))
    assert "server dry run" in dry.stdout
    assert (await kube.store.list("deployments", "default")).items == []
    assert "created" in (await kubectl("apply", "-f", str(path))).stdout
    assert "unchanged" in (await kubectl("apply", "-f", str(path))).stdout
    manifest["spec"]["template"]["spec"]["containers"][0]["image"] = "nginx:2"  # type: ignore[index]
    path.write_text(json.dumps(manifest))
    assert "configured" in (await kubectl("apply", "-f", str(path))).stdout
    stored = await kube.store.get("deployments", "web", "default")
    images = [c["image"] for c in stored["spec"]["template"]["spec"]["containers"]]
    assert images == ["nginx:2", "busybox"]
    assert stored["metadata"]["generation"] == 2

    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "solo"},
        "spec": {"containers": [{"name": "a", "image": "x"}]},
    }
    (tmp_path / "pod.json").write_text(json.dumps(pod))
    await kubectl("create", "-f", str(tmp_path / "pod.json"))
    again = await kubectl("create", "-f", str(tmp_path / "pod.json"), check=False)
    assert again.returncode != 0
    assert "AlreadyExists" in again.stderr
    await kubectl("delete", "-f", str(tmp_path / "pod.json"), "--timeout=10s")
    await kubectl("delete", "deployment", "web", "--timeout=10s")
    assert (await kube.store.list("pods", "default")).items == []
    assert (await kube.store.list("deployments", "default")).items == []


async def test_cordon_label_annotate_patch_scale(kube: KubeApiServer, kubectl: Kubectl) -> None:
    """cordon/uncordon, label, annotate, the three patch types and scale reach the store."""
    await add_node(kube, "n1")
    await kubectl("cordon", "n1")
    cordoned = await kube.store.get("nodes", "n1")
    assert cordoned["spec"]["unschedulable"] is True
    # the node lifecycle controller's taint (TaintNodesByCondition) comes with the cordon
    assert cordoned["spec"]["taints"] == [
        {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
    ]
    assert "SchedulingDisabled" in (await kubectl("get", "node", "n1")).stdout
    await kubectl("label", "node", "n1", "team=a")
    await kubectl("annotate", "node", "n1", "note=x")
    await kubectl(
        "patch",
        "node",
        "n1",
        "--type=json",
        "-p",
        '[{"op":"add","path":"/metadata/labels/j","value":"1"}]',
    )
    await kubectl(
        "patch", "node", "n1", "--type=merge", "-p", '{"metadata":{"labels":{"team":null}}}'
    )
    await kubectl("uncordon", "n1")
    node = await kube.store.get("nodes", "n1")
    assert node["metadata"]["labels"] == {"kubernetes.io/hostname": "n1", "j": "1"}
    assert node["metadata"]["annotations"] == {"note": "x"}
    assert not node["spec"].get("unschedulable")
    assert not node["spec"].get("taints")
    await kube.store.create(
        "deployments",
        {
            "metadata": {"name": "web"},
            "spec": {
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "a", "image": "x"}]},
                },
            },
        },
        "default",
    )
    await kubectl("scale", "deployment", "web", "--replicas=3")
    assert (await kube.store.get("deployments", "web", "default"))["spec"]["replicas"] == 3


async def test_get_watch_prints_new_objects(kube: KubeApiServer, kubectl: Kubectl) -> None:
    """kubectl get -w prints a pod created after it started watching."""
    env = {**os.environ, "KUBECONFIG": str(kubectl.kubeconfig), "HOME": str(kubectl.home)}
    process = await asyncio.create_subprocess_exec(
        "kubectl",
        "get",
        "pods",
        "-w",
        "--request-timeout=20s",
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stdout is not None
    try:
        # the watch is open once the server has a watcher; then create the pod
        await until(lambda: kube.api.open_watches, timeout_seconds=15)
        await kube.store.create(
            "pods",
            {"metadata": {"name": "late"}, "spec": {"containers": [{"name": "a", "image": "x"}]}},
            "default",
        )
        async with asyncio.timeout(15):
            line = b""
            while b"late" not in line:
                line = await process.stdout.readline()
                assert line, "kubectl get -w ended before printing the pod"
        assert line.split()[:3] == [b"late", b"0/1", b"Pending"]
    finally:
        process.kill()
        await process.wait()


async def test_drain_evicts_and_respects_pod_disruption_budget(
    kube: KubeApiServer, kubectl: Kubectl
) -> None:
    """kubectl drain evicts what a PodDisruptionBudget allows, is held back by it, and finishes
    once the budget is gone."""
    await add_node(kube, "n1")
    rs = await kube.store.create(
        "replicasets",
        {
            "metadata": {"name": "web"},
            "spec": {
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "app", "image": "nginx"}]},
                },
            },
        },
        "default",
    )
    owner = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "name": "web",
        "uid": rs["metadata"]["uid"],
        "controller": True,
    }
    for name in ("web-1", "web-2"):
        await add_running_pod(kube, name, "n1", {"app": "web"}, owner)
    await kube.store.create(
        "poddisruptionbudgets",
        {
            "metadata": {"name": "web"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}},
        },
        "default",
    )
    async with kubelet_finishing_deletions(kube):
        blocked = await kubectl("drain", "n1", "--timeout=3s", check=False)
        assert blocked.returncode != 0
        assert "disruption budget" in blocked.stderr
        remaining = (await kube.store.list("pods", field_selector="spec.nodeName=n1")).items
        assert len(remaining) == 1
        await kube.store.delete("poddisruptionbudgets", "web", "default")
        await kubectl("drain", "n1", "--timeout=10s")
    assert (await kube.store.list("pods", field_selector="spec.nodeName=n1")).items == []
    assert (await kube.store.get("nodes", "n1"))["spec"]["unschedulable"] is True


async def test_crd_then_custom_resource_with_printer_columns(
    kube: KubeApiServer, kubectl: Kubectl, tmp_path: Path
) -> None:
    """Applying a CRD serves its kind; kubectl get prints its additionalPrinterColumns."""
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {
                "plural": "widgets",
                "singular": "widget",
                "kind": "Widget",
                "shortNames": ["wg"],
            },
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "x-kubernetes-preserve-unknown-fields": True,
                        }
                    },
                    "additionalPrinterColumns": [
                        {"name": "Size", "type": "integer", "jsonPath": ".spec.size"}
                    ],
                }
            ],
        },
    }
    widget = {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": "w1"},
        "spec": {"size": 3},
    }
    (tmp_path / "crd.json").write_text(json.dumps(crd))
    (tmp_path / "widget.json").write_text(json.dumps(widget))
    await kubectl("apply", "-f", str(tmp_path / "crd.json"))
    await kubectl("apply", "-f", str(tmp_path / "widget.json"))
    await kubectl(
        "patch", "wg", "w1", "--subresource=status", "--type=merge", "-p", '{"status":{"ok":true}}'
    )
    lines = (await kubectl("get", "wg")).stdout.splitlines()
    assert lines[0].split() == ["NAME", "SIZE", "AGE"]
    assert lines[1].split()[:2] == ["w1", "3"]
    stored = await kube.store.get("widgets", "w1", "default")
    assert stored["status"] == {"ok": True}
    await kubectl("delete", "crd", "widgets.example.com")
    with pytest.raises(Exception, match="widgets"):
        kube.store.resource("widgets")


REPO = Path(__file__).resolve().parents[3]


async def test_daiku_crds_and_examples_apply_with_schema_defaults(
    kube: KubeApiServer, kubectl: Kubectl
) -> None:
    """kubectl applies daiku's CRDs and example objects; the schema's defaults are filled in and
    undeclared fields are pruned, as the real apiserver does."""
    await kubectl("apply", "-f", str(REPO / "deploy" / "crds"))
    await kubectl("apply", "-f", str(REPO / "deploy" / "examples" / "nodepool-default.yaml"))
    await kubectl("apply", "-f", str(REPO / "deploy" / "examples" / "ec2nodeclass-default.yaml"))
    names = (await kubectl("get", "nodepools,ec2nodeclasses", "-o", "name")).stdout.split()
    assert names == ["nodepool.daiku.dev/default", "ec2nodeclass.daiku.dev/default"]
    await kube.store.create(
        "nodepools.daiku.dev",
        {
            "apiVersion": "daiku.dev/v1",
            "kind": "NodePool",
            "metadata": {"name": "bare"},
            "spec": {
                "template": {
                    "spec": {
                        "nodeClassRef": {"group": "daiku.dev", "kind": "EC2NodeClass", "name": "x"},
                        "requirements": [],
                    }
                },
                "notAField": True,
            },
        },
    )
    bare = await kube.store.get("nodepools.daiku.dev", "bare")
    assert "notAField" not in bare["spec"]
    assert bare["spec"]["disruption"]["consolidationPolicy"] == "WhenEmptyOrUnderutilized"
    assert bare["spec"]["template"]["spec"]["expireAfter"] == "720h"


async def test_daiku_printer_columns_render_filters_and_escaped_dots(
    kube: KubeApiServer, kubectl: Kubectl
) -> None:
    """`kubectl get nodeclaims` shows type, capacity, zone and ready (escaped-dot label paths
    and `[?(@.type=="Ready")]` filters); NodePools and EC2NodeClasses show READY."""
    await kubectl("apply", "-f", str(REPO / "deploy" / "crds"))
    for example in ("nodepool-default.yaml", "ec2nodeclass-default.yaml", "nodeclaim.yaml"):
        await kubectl("apply", "-f", str(REPO / "deploy" / "examples" / example))
    claim = yaml.safe_load((REPO / "deploy" / "examples" / "nodeclaim.yaml").read_text())
    await kube.store.patch(
        "nodeclaims.daiku.dev",
        "default-x7k2p",
        {"status": claim["status"]},
        subresource="status",
    )
    ready = {
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "Ready",
                "message": "",
                "lastTransitionTime": "2026-11-25T21:00:00Z",
            }
        ]
    }
    await kube.store.patch(
        "nodepools.daiku.dev", "default", {"status": ready}, subresource="status"
    )
    await kube.store.patch(
        "ec2nodeclasses.daiku.dev", "default", {"status": ready}, subresource="status"
    )

    claims = (await kubectl("get", "nodeclaims")).stdout.splitlines()
    assert claims[0].split() == ["NAME", "TYPE", "CAPACITY", "ZONE", "NODE", "READY", "AGE"]
    assert claims[1].split()[:6] == [
        "default-x7k2p",
        "m6g.large",
        "spot",
        "us-west-2a",
        "ip-10-0-1-23.us-west-2.compute.internal",
        "True",
    ]
    for kind in ("nodepools", "ec2nodeclasses"):
        lines = (await kubectl("get", kind)).stdout.splitlines()
        start = lines[0].index("READY")  # kubectl aligns cells under their header
        assert lines[1][start:].split()[0] == "True", lines


def _nodepool(name: str, **spec: Any) -> dict[str, Any]:
    """A NodePool with an empty template and `spec` beside it."""
    template = {
        "spec": {
            "nodeClassRef": {"group": "daiku.dev", "kind": "EC2NodeClass", "name": "x"},
            "requirements": [],
        }
    }
    return {
        "apiVersion": "daiku.dev/v1",
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {"template": template, **spec},
    }


async def test_invalid_custom_objects_are_refused(
    kube: KubeApiServer, kubectl: Kubectl, tmp_path: Path
) -> None:
    """A NodePool breaking its CRD's schema (an unknown enum value) is refused with 422 Invalid
    and kubectl prints the field."""
    await kubectl("apply", "-f", str(REPO / "deploy" / "crds"))
    pool = _nodepool("bad", disruption={"consolidationPolicy": "Sometimes"})
    (tmp_path / "bad.json").write_text(json.dumps(pool))
    refused = await kubectl("apply", "-f", str(tmp_path / "bad.json"), check=False)
    assert refused.returncode != 0
    assert "is invalid" in refused.stderr
    assert "consolidationPolicy" in refused.stderr
    with pytest.raises(NotFound):
        await kube.store.get("nodepools.daiku.dev", "bad")


@pytest.mark.parametrize("cpu", [-5, "-5", "1e20000000"])
async def test_a_nodepool_limit_that_is_negative_or_unbounded_is_refused(
    kube: KubeApiServer, kubectl: Kubectl, tmp_path: Path, cpu: int | str
) -> None:
    """`limits.cpu: -5` or a twenty-million-digit exponent is refused by the API server with
    422 Invalid naming spec.limits.cpu (the CRD's bounded, non-negative quantity)."""
    await kubectl("apply", "-f", str(REPO / "deploy" / "crds"))
    pool = _nodepool("unbounded", limits={"cpu": cpu})
    (tmp_path / "pool.json").write_text(json.dumps(pool))
    refused = await kubectl("apply", "-f", str(tmp_path / "pool.json"), check=False)
    assert refused.returncode != 0
    assert "is invalid" in refused.stderr
    assert "spec.limits.cpu" in refused.stderr
    with pytest.raises(NotFound):
        await kube.store.get("nodepools.daiku.dev", "unbounded")


async def test_module_entry_point_serves_kubectl(tmp_path: Path) -> None:
    """`python -m localcloud.kube` prints ready, writes a kubeconfig, and kubectl can use it."""
    import sys

    kubeconfig = tmp_path / "kubeconfig"
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "localcloud.kube",
        "--kubeconfig",
        str(kubeconfig),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    assert process.stdout is not None
    try:
        async with asyncio.timeout(30):
            line = b""
            while b"ready" not in line:
                line = await process.stdout.readline()
                assert line, "the server exited before it was ready"
        (tmp_path / "home").mkdir()
        namespaces = await Kubectl(kubeconfig, tmp_path / "home")("get", "namespaces", "-o", "name")
        assert "namespace/kube-system" in namespaces.stdout.split()
    finally:
        process.terminate()
        await process.wait()


async def test_logs_and_auth_can_i(kube: KubeApiServer, kubectl: Kubectl) -> None:
    """kubectl logs answers like a kubelet with nothing to say; kubectl auth can-i says yes."""
    await add_node(kube, "n1")
    await add_running_pod(kube, "web-1", "n1", {"app": "web"})
    assert (await kubectl("logs", "web-1")).stdout == ""
    await kube.store.create(
        "pods",
        {"metadata": {"name": "new"}, "spec": {"containers": [{"name": "a", "image": "x"}]}},
        "default",
    )
    waiting = await kubectl("logs", "new", check=False)
    assert "is waiting to start" in waiting.stderr
    assert (await kubectl("auth", "can-i", "delete", "nodes")).stdout.strip() == "yes"


ROOT = Path(__file__).resolve().parents[3]


async def test_apply_k_of_the_deploy_overlay_creates_every_object(
    kube: KubeApiServer, kubectl: Kubectl
) -> None:
    """`kubectl apply -k deploy/overlays/default` works as against a real cluster: every kind
    it holds (RBAC, networking.k8s.io NetworkPolicies, policy PDBs, CRDs, apps, core) is served,
    and a second apply changes nothing."""
    overlay = str(ROOT / "deploy" / "overlays" / "default")
    rendered = await kubectl("kustomize", overlay)
    expected = [
        (doc["kind"], doc["metadata"]["name"]) for doc in yaml.safe_load_all(rendered.stdout) if doc
    ]

    first = await kubectl("apply", "-k", overlay, timeout_seconds=60)
    second = await kubectl("apply", "-k", overlay, timeout_seconds=60)

    assert first.stdout.count(" created") == len(expected), first.stdout
    # kubectl itself re-sends a PDB's selector (patchStrategy "replace") and a Deployment
    # strategy whose type the server defaulted (`$retainKeys`), so it says "configured" for
    # those against any server; everything else must be "unchanged".
    changed = [
        line
        for line in second.stdout.splitlines()
        if not line.endswith(" unchanged")
        and not line.startswith(("poddisruptionbudget", "deployment"))
    ]
    assert changed == []
    actuator = await kube.store.get("deployments", "daiku-actuator", "daiku")
    assert actuator["spec"]["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
    }
    kinds = {kind for kind, _ in expected}
    assert {"ClusterRole", "RoleBinding", "NetworkPolicy", "PodDisruptionBudget"} <= kinds


@pytest.mark.parametrize(
    ("resource", "body"),
    [
        (
            "statefulsets",
            {
                "metadata": {"name": "db"},
                "spec": {
                    "serviceName": "db",
                    "selector": {"matchLabels": {"app": "db"}},
                    "template": {
                        "metadata": {"labels": {"app": "db"}},
                        "spec": {"containers": [{"name": "db", "image": "postgres"}]},
                    },
                },
            },
        ),
        (
            "cronjobs",
            {
                "metadata": {"name": "nightly"},
                "spec": {
                    "schedule": "0 3 * * *",
                    "jobTemplate": {
                        "spec": {
                            "template": {
                                "spec": {
                                    "restartPolicy": "Never",
                                    "containers": [{"name": "x", "image": "busybox"}],
                                }
                            }
                        }
                    },
                },
            },
        ),
        (
            "horizontalpodautoscalers",
            {
                "metadata": {"name": "web"},
                "spec": {
                    "scaleTargetRef": {
                        "apiVersion": "apps/v1",
                        "kind": "Deployment",
                        "name": "web",
                    },
                    "minReplicas": 1,
                    "maxReplicas": 5,
                },
            },
        ),
    ],
)
async def test_workload_groups_are_served_and_listed_by_kubectl(
    kube: KubeApiServer, kubectl: Kubectl, resource: str, body: dict[str, Any]
) -> None:
    """StatefulSets, CronJobs and HPAs are stored and shown by kubectl under their short names
    (localcloud runs no controller for them: decision 0005)."""
    await kube.store.create(resource, body, "default")

    listed = await kubectl("get", resource, "-o", "name")

    assert listed.stdout.strip().endswith("/" + body["metadata"]["name"])
