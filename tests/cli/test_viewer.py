"""`daiku viewer`: the view computed from cluster objects, and the Textual app driven headless
against localcloud's API server over HTTPS, redrawn from the watch as the cluster changes."""

from __future__ import annotations

import asyncio
import html
import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from daiku_cli.viewer import ClusterFeed, ViewerApp
from daiku_cli.viewer_model import NO_NODEPOOL, cluster_view
from daiku_cli.viewer_render import format_age, usage_bar
from localcloud.kube.server import KubeApiServer
from scheduler_svc.kube.client import api_client_from_kubeconfig
from tests.polling import until

ROOT = Path(__file__).resolve().parents[2]
NOW = datetime(2026, 11, 26, 12, 0, 0, tzinfo=UTC)
PRICES = {("c6g.large", "us-east-1a", "spot"): 0.0306}


def node(name: str, pool: str | None = "default", **extra: Any) -> dict[str, Any]:
    labels = {
        "node.kubernetes.io/instance-type": "c6g.large",
        "topology.kubernetes.io/zone": "us-east-1a",
        "karpenter.sh/capacity-type": "spot",
    }
    if pool:
        labels["karpenter.sh/nodepool"] = pool
    return {
        "metadata": {
            "name": name,
            "labels": labels,
            "creationTimestamp": "2026-11-26T11:00:00Z",
            **extra,
        },
        "status": {
            "allocatable": {"cpu": "1930m", "memory": "3Gi", "pods": "29"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def pod(
    name: str, node_name: str | None = None, cpu: str = "500m", **status: Any
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "c",
                "image": "pause",
                "resources": {"requests": {"cpu": cpu, "memory": "512Mi"}},
            }
        ]
    }
    if node_name:
        spec["nodeName"] = node_name
    return {
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
        "status": {"phase": "Running" if node_name else "Pending", **status},
    }


def test_a_node_shows_what_its_pods_request_against_its_allocatable_and_its_price() -> None:
    view = cluster_view(
        pods=[pod("a", "n1"), pod("b", "n1", cpu="1"), pod("done", "n1", phase="Succeeded")],
        nodes=[node("n1"), node("other", pool=None)],
        claims=[],
        prices=PRICES,
        now=NOW,
    )

    pools = dict(view.pools)
    (line,) = pools["default"]
    assert (line.cpu_requested_millis, line.cpu_allocatable_millis) == (1500, 1930)
    assert (line.memory_requested_bytes, line.memory_allocatable_bytes) == (1 << 30, 3 << 30)
    assert line.pods == 2
    assert line.price_per_hour == 0.0306
    assert line.age_seconds == 3600
    assert [n.name for n in pools[NO_NODEPOOL]] == ["other"]
    assert view.hourly_cost == pytest.approx(2 * 0.0306)


def test_pending_pods_carry_the_schedulers_reason_and_claims_their_stage() -> None:
    waiting = pod(
        "w",
        conditions=[
            {"type": "PodScheduled", "status": "False", "message": "incompatible with nodepool"}
        ],
    )
    launched = {
        "metadata": {"name": "default-x", "labels": {"karpenter.sh/nodepool": "default"}},
        "status": {"conditions": [{"type": "Launched", "status": "True"}]},
    }
    ready = {
        "metadata": {"name": "default-y"},
        "status": {
            "conditions": [
                {"type": t, "status": "True"} for t in ("Launched", "Registered", "Initialized")
            ]
        },
    }

    view = cluster_view(pods=[waiting], nodes=[], claims=[launched, ready], prices={}, now=NOW)

    assert [(p.key, p.reason) for p in view.pending] == [
        ("default/w", "incompatible with nodepool")
    ]
    assert [(c.name, c.nodepool, c.stage) for c in view.in_flight] == [
        ("default-x", "default", "registering")
    ]


def test_an_object_the_converter_refuses_is_left_out_not_fatal() -> None:
    bad_pod = pod("bad", "n1", cpu="lots")
    bad_node = node("broken")
    bad_node["status"]["allocatable"]["cpu"] = "-1"

    view = cluster_view(
        pods=[bad_pod, pod("ok", "n1")], nodes=[node("n1"), bad_node], claims=[], prices={}, now=NOW
    )

    ((_, lines),) = view.pools
    assert [(line.name, line.pods) for line in lines] == [("n1", 1)]


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (None, "?"),
        (0, "0s"),
        (119, "119s"),
        (120, "2m"),
        (3599, "59m"),
        (3600, "1h"),
        (86400, "1d"),
    ],
)
def test_ages_read_as_kubectl_prints_them(seconds: float | None, text: str) -> None:
    assert format_age(seconds) == text


def test_a_bar_is_full_and_red_past_allocatable() -> None:
    assert usage_bar(1, 2).plain.startswith("██████░░░░░░")
    over = usage_bar(3, 2)
    assert over.plain.startswith("█" * 12)
    assert "150%" in over.plain
    assert any(span.style == "red" for span in over.spans)
    assert usage_bar(1, 0).plain.endswith("0%")


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[tuple[KubeApiServer, Path]]:
    api_server = KubeApiServer(host="127.0.0.1", port=0, tls=True)
    await api_server.start()
    try:
        for crd in sorted((ROOT / "deploy" / "crds").glob("*.yaml")):
            await api_server.store.create(
                "customresourcedefinitions", yaml.safe_load(crd.read_text())
            )
        yield api_server, api_server.write_kubeconfig(tmp_path / "kubeconfig")
    finally:
        await api_server.close()


def screen_text(viewer: ViewerApp) -> str:
    """The terminal screen as text (from Textual's own screenshot of it)."""
    svg = viewer.export_screenshot()
    return html.unescape(re.sub(r"<[^>]+>", "", svg)).replace("\xa0", " ")


async def test_the_screen_follows_the_cluster_through_the_watch(
    server: tuple[KubeApiServer, Path],
) -> None:
    api_server, kubeconfig = server
    await api_server.store.create("nodes", node("ip-10-0-1-1.ec2.internal"))
    await api_server.store.create("pods", pod("web-1", "ip-10-0-1-1.ec2.internal"), "default")
    async with await api_client_from_kubeconfig(kubeconfig) as api:
        feed = ClusterFeed(api)
        viewer = ViewerApp(feed, PRICES, clock=lambda: NOW)
        async with viewer.run_test(size=(160, 50)):
            await until(lambda: "ip-10-0-1-1.ec2.internal" in screen_text(viewer), 30)
            first = screen_text(viewer)
            assert "NodePool default: 1 nodes" in first
            assert "c6g.large" in first
            assert "0.0306" in first
            assert "26%" in first

            await api_server.store.create("pods", pod("web-2"), "default")
            await until(lambda: "default/web-2" in screen_text(viewer), 30)
            # The scheduler's reason arrives as a status update, as kube-scheduler writes it.
            unschedulable = {
                "type": "PodScheduled",
                "status": "False",
                "message": "no NodePool fits",
            }
            await api_server.store.patch(
                "pods",
                "web-2",
                {"status": {"conditions": [unschedulable]}},
                namespace="default",
                subresource="status",
            )
            await until(lambda: "no NodePool fits" in screen_text(viewer), 30)

        assert all(watch.lists_completed == 1 for watch in feed._watches)
        assert sum(watch.events_delivered for watch in feed._watches) >= 1


async def test_once_prints_one_screen_with_bundled_prices_and_exits(
    server: tuple[KubeApiServer, Path],
) -> None:
    api_server, kubeconfig = server
    await api_server.store.create("nodes", node("ip-10-0-1-1.ec2.internal"))
    daiku = Path(sys.executable).parent / "daiku"
    process = await asyncio.create_subprocess_exec(
        str(daiku),
        "viewer",
        "--once",
        "--kubeconfig",
        str(kubeconfig),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "COLUMNS": "200"},
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(), 120)

    assert process.returncode == 0, stderr.decode()
    text = stdout.decode()
    assert "ip-10-0-1-1.ec2.internal" in text
    assert "1 nodes" in text
    assert re.search(r"\$0\.0\d{3}/hour", text), text


def test_an_unreachable_cluster_is_a_dependency_failure(tmp_path: Path) -> None:
    # A process of its own, as a user runs it: the command configures structlog for itself,
    # which in this process would change every later test's logging.
    daiku = Path(sys.executable).parent / "daiku"
    missing = str(tmp_path / "none")
    result = subprocess.run(
        [str(daiku), "viewer", "--once", "--kubeconfig", missing],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert result.returncode == 3
    assert "cannot read the cluster" in result.stderr
