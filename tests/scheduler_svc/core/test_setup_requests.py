"""What a pending pod asks for, as the solver counts it: every container, init containers and
pod overhead included, extended resources (GPUs) wherever they are requested, DaemonSets'
extended resources too; and offerings reported unavailable are never chosen, whether the
catalog index is built for the solve or taken from a ``CatalogCache``."""

from __future__ import annotations

from scheduler_svc.core import (
    InitContainer,
    NodePool,
    Pod,
    Resources,
    SchedulingInput,
    UnavailableOffering,
    solve,
)
from scheduler_svc.core.catalog_index import CatalogCache
from tests.scheduler_svc.core.builders import GIB, instance_type, run

GPU = "nvidia.com/gpu"
CPU_ONLY = instance_type("cpu-only", 4, 16, 0.20)
WITH_GPU = instance_type("with-gpu", 4, 16, 1.00, gpus=1)


def test_a_pod_with_two_containers_asks_for_both() -> None:
    """Two containers of 1.5 cpu each: the pod needs 3 cpu (plus 1 pod), so it does not fit
    the 2-cpu type and goes on the 4-cpu one, though the 2-cpu type is cheaper and holds
    either container alone."""
    small = instance_type("small", 2, 8, 0.10)
    big = instance_type("big", 4, 8, 0.20)
    two = Pod(
        "two",
        containers=(Resources(cpu_millis=1500, memory_bytes=GIB),) * 2,
    )

    result = run([two], [small, big])

    assert [(c.instance_type, c.pods) for c in result.new_claims] == [("big", ("default/two",))]
    assert result.new_claims[0].requests.cpu_millis == 3000


def test_a_gpu_asked_for_only_by_an_init_container_needs_a_gpu_node() -> None:
    """The init container asks for 1 GPU, the app container for none: the pod's effective
    request is max(init, app) = 1 GPU, so only the GPU type (5x the price) can run it."""
    warmup = Pod(
        "warmup",
        containers=(Resources(cpu_millis=1000, memory_bytes=GIB),),
        init_containers=(InitContainer(Resources(cpu_millis=500, extended=((GPU, 1),))),),
    )

    result = run([warmup], [CPU_ONLY, WITH_GPU])

    assert [c.instance_type for c in result.new_claims] == ["with-gpu"]
    assert dict(result.new_claims[0].requests.extended) == {GPU: 1}


def test_a_gpu_in_the_pod_overhead_needs_a_gpu_node() -> None:
    """The RuntimeClass overhead carries 1 GPU, the container none: the overhead is added to
    the request, so the pod needs the GPU type."""
    sandboxed = Pod(
        "sandboxed",
        containers=(Resources(cpu_millis=1000, memory_bytes=GIB),),
        overhead=Resources(cpu_millis=100, extended=((GPU, 1),)),
    )

    result = run([sandboxed], [CPU_ONLY, WITH_GPU])

    assert [c.instance_type for c in result.new_claims] == ["with-gpu"]


def test_a_daemonset_asking_for_a_gpu_makes_new_nodes_gpu_nodes() -> None:
    """A DaemonSet running on every node of the NodePool asks for 1 GPU; the pending pod asks
    for none. The new node must hold the DaemonSet's pod too, so the CPU-only type (cheaper)
    is out and the claim goes on the GPU type."""
    device_agent = Pod(
        "device-agent", containers=(Resources(cpu_millis=100, extended=((GPU, 1),)),)
    )
    app = Pod("app", containers=(Resources(cpu_millis=1000, memory_bytes=GIB),))

    result = run([app], [CPU_ONLY, WITH_GPU], daemonsets=(device_agent,))

    assert [c.instance_type for c in result.new_claims] == ["with-gpu"]


def test_an_unavailable_offering_is_skipped_with_a_catalog_cache_too() -> None:
    """The cheap type's only offering (zone-a on-demand) is reported unavailable (ICE): the
    claim must go on the dearer type, with the index taken from a ``CatalogCache`` as the
    provisioner does, exactly as without one."""
    cheap = instance_type("cheap", 2, 8, 0.10, zones=("zone-a",))
    dear = instance_type("dear", 2, 8, 0.30, zones=("zone-a",))
    problem = SchedulingInput(
        (Pod("p", containers=(Resources(cpu_millis=1000, memory_bytes=GIB),)),),
        (NodePool("default"),),
        (cheap, dear),
        unavailable_offerings=frozenset({UnavailableOffering("cheap", "zone-a", "on-demand")}),
    )

    with_cache = solve(problem, catalogs=CatalogCache())
    without = solve(problem)

    for result in (with_cache, without):
        assert [c.instance_type for c in result.new_claims] == ["dear"]
        assert [o.instance_type for o in result.new_claims[0].offerings] == ["dear"]
