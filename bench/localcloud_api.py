"""Throughput of localcloud's Kubernetes API server: is it ever the bottleneck of a benchmark?

    uv run python bench/localcloud_api.py [--pods 10000] [--nodes 1000] [--watchers 5]

Prints:
- writes/s in-process (Store.create/patch) and over HTTP (kubernetes wire format, plain HTTP,
  16 concurrent clients), target >= 2,000/s;
- watch events/s delivered, fanned out to N HTTP watch streams (sum over watchers), and the
  same in-process, target >= 20,000/s;
- memory and list latency with 10k pods on 1k nodes;
- NodeClaim writes/s in-process, where daiku's CRD schema and CEL rules are checked: creates
  of claims with the same requirements, status writes, and label writes.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
import structlog
import yaml

from localcloud.kube.server import KubeApiServer
from localcloud.kube.store import Store


def pod(name: str, node: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": name.rsplit("-", 1)[0], "bench": "yes"}},
        "spec": {
            "nodeName": node,
            "containers": [
                {
                    "name": "app",
                    "image": "nginx:1.27",
                    "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
                }
            ],
        },
    }


def node(name: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "topology.kubernetes.io/zone": "us-east-1a",
                "node.kubernetes.io/instance-type": "m5.large",
            },
        },
        "spec": {"providerID": f"aws:///us-east-1a/i-{name}"},
        "status": {
            "capacity": {"cpu": "2", "memory": "8Gi", "pods": "29"},
            "allocatable": {"cpu": "1930m", "memory": "7Gi", "pods": "29"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def rss_mib() -> float:
    """Current resident set size (Linux /proc), in MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class _Timed:
    """Wall and CPU time of a block; the CPU figure moves less with the machine's load."""

    def __enter__(self) -> _Timed:
        self._wall, self._cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *_: object) -> None:
        self.wall_seconds = time.perf_counter() - self._wall
        self.cpu_seconds = time.process_time() - self._cpu

    def figure(self, count: int) -> str:
        """`12,345/s (81 us CPU each)`"""
        cpu_us = self.cpu_seconds / count * 1e6
        return f"{count / self.wall_seconds:,.0f}/s ({cpu_us:,.0f} us CPU each)"


async def bench_store_writes(count: int) -> None:
    store = Store(event_window=1000)
    with _Timed() as created:
        for i in range(count):
            await store.create("pods", pod(f"w-{i}", "n1"), "default")
    with _Timed() as patched:
        for i in range(count):
            await store.patch(
                "pods", f"w-{i}", {"metadata": {"labels": {"v": "2"}}}, "merge", namespace="default"
            )
    print(
        f"store writes (in-process): create {created.figure(count)}, patch {patched.figure(count)}"
    )


_SERVER_PROCESS = """
import asyncio, structlog, logging
structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
from localcloud.kube.server import KubeApiServer
async def main():
    async with KubeApiServer(token="bench", event_window=1000) as api:
        print(api.url, flush=True)
        await asyncio.sleep(3600)
asyncio.run(main())
"""


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (Linux /proc), in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def bench_http_writes(count: int, concurrency: int = 16) -> None:
    """The server in its own process (as `python -m localcloud` runs it), clients here."""
    server = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _SERVER_PROCESS, stdout=asyncio.subprocess.PIPE
    )
    assert server.stdout is not None
    try:
        base = (await asyncio.wait_for(server.stdout.readline(), 30)).decode().strip()
        cpu_before = _cpu_seconds(server.pid)
        await _http_writes(base, count, concurrency)
        cpu_used = _cpu_seconds(server.pid) - cpu_before
        print(
            f"  server CPU per HTTP write: {cpu_used / count * 1000:.2f} ms "
            f"-> {count / cpu_used:,.0f} writes/s per fully used core"
        )
    finally:
        server.terminate()
        await server.wait()


async def _http_writes(base: str, count: int, concurrency: int) -> None:
    headers = {"Authorization": "Bearer bench", "Content-Type": "application/json"}
    url = f"{base}/api/v1/namespaces/default/pods"
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(count):
        queue.put_nowait(i)
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(headers=headers, connector=connector) as session:

        async def worker() -> None:
            while not queue.empty():
                i = queue.get_nowait()
                async with session.post(url, data=json.dumps(pod(f"h-{i}", "n1"))) as response:
                    if response.status != 201:
                        raise RuntimeError(f"create h-{i}: {response.status}")
                    await response.read()

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        elapsed = time.perf_counter() - started
    print(
        f"HTTP writes (create; server in its own process, {concurrency} clients): "
        f"{count / elapsed:,.0f}/s"
    )


async def bench_watch_fanout(count: int, watchers: int) -> None:
    async with KubeApiServer(event_window=count + 10) as api:
        headers = {"Authorization": f"Bearer {api.token}"}
        since = api.store.resource_version
        # the writes happen first, then every watcher replays them from the window: this
        # measures delivery, not the writer
        for i in range(count):
            await api.store.create("pods", pod(f"f-{i}", f"n{i % 100}"), "default")
        url = f"{api.url}/api/v1/pods?watch=true&resourceVersion={since}&timeoutSeconds=60"
        async with aiohttp.ClientSession(headers=headers) as session:

            async def consume() -> int:
                received = 0
                async with session.get(url) as response:
                    async for line in response.content:
                        if line.strip():
                            json.loads(line)
                            received += 1
                            if received == count:
                                return received
                return received

            started = time.perf_counter()
            totals = await asyncio.gather(*(consume() for _ in range(watchers)))
            elapsed = time.perf_counter() - started
        assert all(t == count for t in totals), totals
        print(
            f"HTTP watch fan-out ({watchers} watchers x {count} events, decoded by the client): "
            f"{sum(totals) / elapsed:,.0f} events/s"
        )

        async def consume_in_process() -> int:
            watcher = api.store.watch("pods", since_rv=since, copy=False)
            received = 0
            while received < count:
                received += len(await watcher.poll(5))
            return received

        started = time.perf_counter()
        totals = await asyncio.gather(*(consume_in_process() for _ in range(watchers)))
        elapsed = time.perf_counter() - started
        print(
            f"in-process watch fan-out ({watchers} watchers): {sum(totals) / elapsed:,.0f} events/s"
        )


async def bench_live_fanout(count: int, watchers: int) -> None:
    """Watchers connected first, then writes: end-to-end write -> every watcher received."""
    async with KubeApiServer(event_window=count + 10) as api:
        headers = {"Authorization": f"Bearer {api.token}"}
        since = api.store.resource_version
        url = f"{api.url}/api/v1/pods?watch=true&resourceVersion={since}&timeoutSeconds=60"
        async with aiohttp.ClientSession(headers=headers) as session:
            responses = [await session.get(url) for _ in range(watchers)]

            async def consume(response: aiohttp.ClientResponse) -> int:
                received = 0
                async for line in response.content:
                    if line.strip():
                        received += 1
                        if received == count:
                            break
                response.release()
                return received

            consumers = [asyncio.create_task(consume(r)) for r in responses]
            started = time.perf_counter()
            for i in range(count):
                await api.store.create("pods", pod(f"l-{i}", "n1"), "default")
                if i % 200 == 0:
                    await asyncio.sleep(0)  # let the streams drain, as a real writer would
            totals = await asyncio.gather(*consumers)
            elapsed = time.perf_counter() - started
        print(
            f"live write+fan-out ({count} writes -> {watchers} HTTP watchers): "
            f"{count / elapsed:,.0f} writes/s, {sum(totals) / elapsed:,.0f} events/s delivered"
        )


async def bench_capacity(pods: int, nodes: int) -> None:
    before = rss_mib()
    store = Store(event_window=1000)
    started = time.perf_counter()
    for i in range(nodes):
        await store.create("nodes", node(f"n{i}"))
    for i in range(pods):
        await store.create("pods", pod(f"app{i % 50}-{i}", f"n{i % nodes}"), "default")
    loaded = time.perf_counter() - started
    started = time.perf_counter()
    everything = await store.list("pods", copy=False)
    list_all = time.perf_counter() - started
    started = time.perf_counter()
    on_node = await store.list("pods", field_selector=f"spec.nodeName=n{nodes // 2}", copy=False)
    by_field = time.perf_counter() - started
    print(
        f"capacity: {len(everything.items):,} pods + {nodes:,} nodes loaded in {loaded:.2f}s, "
        f"RSS grew by {rss_mib() - before:,.0f} MiB; list all pods {list_all * 1000:.0f} ms; "
        f"list spec.nodeName=... {by_field * 1000:.0f} ms ({len(on_node.items)} pods)"
    )


async def bench_default_scheduler(pods: int, nodes: int) -> None:
    """How long localcloud's default-scheduler takes to bind a burst of pods (was a timed test)."""
    from localcloud.kube.controllers.scheduler import DefaultScheduler

    store = Store()
    binder = asyncio.create_task(DefaultScheduler(store, retry_debounce_seconds=0.01).run())
    for i in range(nodes):
        await store.create("nodes", node(f"n{i}"))
    started = time.perf_counter()
    for i in range(pods):
        unbound = pod(f"burst-{i}", "")
        del unbound["spec"]["nodeName"]
        await store.create("pods", unbound, "default")
    # The store has no "all bound" event to wait on; the 50 ms poll bounds the figure's error.
    while (await store.list("pods", "default", field_selector="spec.nodeName=")).items:  # noqa: ASYNC110
        await asyncio.sleep(0.05)
    elapsed = time.perf_counter() - started
    binder.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await binder
    print(f"default-scheduler: {pods:,} pods bound to {nodes:,} nodes in {elapsed:.2f}s")


ROOT = Path(__file__).resolve().parents[1]


async def bench_nodeclaim_writes(count: int) -> None:
    store = Store(event_window=1000)
    for crd in sorted((ROOT / "deploy" / "crds").glob("*.yaml")):
        await store.create("customresourcedefinitions", yaml.safe_load(crd.read_text()))
    example = yaml.safe_load((ROOT / "deploy" / "examples" / "nodeclaim.yaml").read_text())
    example.pop("status", None)
    with _Timed() as created:
        for i in range(count):
            claim = {**example, "metadata": {**example["metadata"], "name": f"c-{i}"}}
            await store.create("nodeclaims", claim)
    with _Timed() as status_written:
        for i in range(count):
            condition = {"type": "Launched", "status": "True", "reason": "Launched", "message": ""}
            status = {"providerID": f"aws:///us-east-1a/i-{i}", "conditions": [condition]}
            await store.patch("nodeclaims", f"c-{i}", {"status": status}, subresource="status")
    with _Timed() as labelled:
        for i in range(count):
            await store.patch("nodeclaims", f"c-{i}", {"metadata": {"labels": {"v": "2"}}})
    print(
        f"NodeClaim writes (in-process, schema + CEL): create {created.figure(count)}, "
        f"status {status_written.figure(count)}, labels {labelled.figure(count)}"
    )


async def main() -> None:
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pods", type=int, default=10_000)
    parser.add_argument("--nodes", type=int, default=1_000)
    parser.add_argument("--watchers", type=int, default=5)
    parser.add_argument("--events", type=int, default=10_000)
    args = parser.parse_args()
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"machine: {os.cpu_count()} CPUs, load average {load} (figures scale with it)")
    await bench_capacity(args.pods, args.nodes)
    await bench_default_scheduler(3_000, 300)
    await bench_store_writes(5_000)
    await bench_nodeclaim_writes(1_000)
    await bench_http_writes(3_000)
    await bench_watch_fanout(args.events, args.watchers)
    await bench_live_fanout(5_000, args.watchers)


if __name__ == "__main__":
    asyncio.run(main())
