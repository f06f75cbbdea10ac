"""Allocatable per FACTS §1, one instance type per kube-reserved cpu tier (1, 2, 4, 8+ vCPU),
with the kubelet's systemReserved, podsPerCore and maxPods overrides.

Expected figures are worked out by hand from FACTS §1 in each case's comment (not with the code
under test), so a wrong tier, sign or cap shows up as a wrong number."""

from __future__ import annotations

import pytest

from actuator_svc.core.allocatable import (
    GIB,
    MIB,
    InstanceShape,
    KubeletSettings,
    NodeResources,
    allocatable,
    allocatable_from_capacity,
    capacity,
)

# name, vCPU, MiB, ENIs, IPv4 per ENI (DescribeInstanceTypes, us-east-1)
T2_SMALL = InstanceShape("t2.small", 1, 2048, 3, 4)
M5_LARGE = InstanceShape("m5.large", 2, 8192, 3, 10)
M5_XLARGE = InstanceShape("m5.xlarge", 4, 16384, 4, 15)
M5_2XLARGE = InstanceShape("m5.2xlarge", 8, 32768, 4, 15)
C5_4XLARGE = InstanceShape("c5.4xlarge", 16, 32768, 8, 30)
EPHEMERAL = 17 * GIB  # 20 GiB root volume - 10 % nodefs eviction - 1 GiB kube-reserved


def _shape(resources: NodeResources) -> tuple[int, int, int, int]:
    return (
        resources.cpu_millis,
        resources.memory_bytes // MIB,
        resources.pods,
        resources.ephemeral_storage_bytes,
    )


@pytest.mark.parametrize(
    ("shape", "cpu_millis", "memory_mib", "pods"),
    [
        # 1 vCPU: cpu 1000 - 6 % of core 1 (60) = 940; pods 3 x (4 - 1) + 2 = 11;
        # memory 2048 - ceil(153.6) = 1894, - (11 x 11 + 255 = 376) - 100 = 1418.
        pytest.param(T2_SMALL, 940, 1418, 11, id="1-vcpu"),
        # 2 vCPU: FACTS §1's own check, 1930m / 6903Mi / 29.
        pytest.param(M5_LARGE, 1930, 6903, 29, id="2-vcpu"),
        # 4 vCPU: cpu 4000 - (60 + 10 + 2 x 5 = 80) = 3920; pods 4 x 14 + 2 = 58;
        # memory 16384 - ceil(1228.8) = 15155, - (11 x 58 + 255 = 893) - 100 = 14162.
        pytest.param(M5_XLARGE, 3920, 14162, 58, id="4-vcpu"),
        # 8 vCPU: cpu 8000 - (80 + 4 x 2.5 = 90) = 7910; pods 58;
        # memory 32768 - ceil(2457.6) = 30310, - 893 - 100 = 29317.
        pytest.param(M5_2XLARGE, 7910, 29317, 58, id="8-vcpu"),
        # 16 vCPU: cpu 16000 - (80 + 12 x 2.5 = 110) = 15890; pods 8 x 29 + 2 = 234;
        # memory 30310 - (11 x 234 + 255 = 2829) - 100 = 27381.
        pytest.param(C5_4XLARGE, 15890, 27381, 234, id="16-vcpu"),
    ],
)
def test_allocatable_per_cpu_tier(
    shape: InstanceShape, cpu_millis: int, memory_mib: int, pods: int
) -> None:
    """Each kube-reserved cpu tier, the ENI pod limit and memory reservations as FACTS §1."""
    assert _shape(allocatable(shape)) == (cpu_millis, memory_mib, pods, EPHEMERAL)


def test_capacity_loses_only_the_hypervisor_memory() -> None:
    """Capacity: every core, memory less ceil(7.5 %), the ENI pod limit, the whole root volume."""
    assert _shape(capacity(M5_XLARGE)) == (4000, 15155, 58, 20 * GIB)


@pytest.mark.parametrize(
    ("shape", "kubelet", "cpu_millis", "memory_mib", "pods"),
    [
        # systemReserved comes off on top of kube-reserved: 3920 - 100, 14162 - 200.
        pytest.param(
            M5_XLARGE,
            KubeletSettings(system_reserved_cpu_millis=100, system_reserved_memory_bytes=200 * MIB),
            3820,
            13962,
            58,
            id="system-reserved",
        ),
        # podsPerCore 2 caps 58 at 2 x 4 = 8; kube-reserved memory follows: 11 x 8 + 255 = 343,
        # so memory 15155 - 343 - 100 = 14712.
        pytest.param(M5_XLARGE, KubeletSettings(pods_per_core=2), 3920, 14712, 8, id="per-core"),
        # maxPods 110 replaces the ENI limit: 11 x 110 + 255 = 1465, 7577 - 1465 - 100 = 6012.
        pytest.param(M5_LARGE, KubeletSettings(max_pods=110), 1930, 6012, 110, id="max-pods"),
        # podsPerCore caps maxPods too: min(110, 10 x 2) = 20; 7577 - (11 x 20 + 255) - 100 = 7002.
        pytest.param(
            M5_LARGE,
            KubeletSettings(max_pods=110, pods_per_core=10),
            1930,
            7002,
            20,
            id="max-pods-and-per-core",
        ),
        # podsPerCore above the ENI limit leaves it: min(29, 50 x 2) = 29.
        pytest.param(
            M5_LARGE, KubeletSettings(pods_per_core=50), 1930, 6903, 29, id="loose-per-core"
        ),
        # Explicit kubeReserved replaces the tiers: 2000 - 250, 7577 - 1024 - 100.
        pytest.param(
            M5_LARGE,
            KubeletSettings(kube_reserved_cpu_millis=250, kube_reserved_memory_bytes=GIB),
            1750,
            6453,
            29,
            id="kube-reserved",
        ),
        # A higher memory eviction threshold comes off memory: 6903 + 100 - 500.
        pytest.param(
            M5_LARGE,
            KubeletSettings(eviction_memory_bytes=500 * MIB),
            1930,
            6503,
            29,
            id="eviction",
        ),
    ],
)
def test_kubelet_overrides(
    shape: InstanceShape, kubelet: KubeletSettings, cpu_millis: int, memory_mib: int, pods: int
) -> None:
    """systemReserved, podsPerCore, maxPods, kubeReserved and the eviction threshold change
    allocatable as the kubelet would."""
    assert _shape(allocatable(shape, kubelet)) == (cpu_millis, memory_mib, pods, EPHEMERAL)


def test_nodefs_eviction_percent_and_root_volume() -> None:
    """A 100 GiB root volume with 5 % nodefs eviction leaves 100 - 5 - 1 = 94 GiB."""
    kubelet = KubeletSettings(eviction_nodefs_percent=5)
    result = allocatable(M5_LARGE, kubelet, root_volume_bytes=100 * GIB)
    assert result.ephemeral_storage_bytes == 94 * GIB


def test_devices_are_extended_resources() -> None:
    """A GPU type offers its GPUs under their resource name, untouched by reservations."""
    g4dn = InstanceShape("g4dn.xlarge", 4, 16384, 3, 10, devices={"nvidia.com/gpu": 1})
    assert allocatable(g4dn).extended == {"nvidia.com/gpu": 1}
    assert allocatable(M5_LARGE).extended == {}


def test_kube_reserved_cpu_truncates_each_range_as_the_eks_ami() -> None:
    """The EKS AMI (bootstrap.sh get_cpu_millicores_to_reserve) and Karpenter
    (kubeReservedResources) compute in millicores and truncate each range's share: 5 cores
    reserve 60 + 10 + 10 + 1000 x 25 / 10000 = 82m (2.5 truncated to 2; not 83m), and a
    capacity of 2500m (a user-written catalog) counts its half core: 60 + 10 + 500 x 50 /
    10000 = 72m."""
    five = InstanceShape("five.xlarge", 5, 16384, 4, 15)
    assert allocatable(five).cpu_millis == 5000 - 82
    half = NodeResources(cpu_millis=2500, memory_bytes=8 * GIB, pods=29, ephemeral_storage_bytes=0)
    assert allocatable_from_capacity(half).cpu_millis == 2500 - 72


def test_reserves_beyond_capacity_leave_zero_not_less_or_more() -> None:
    """systemReserved above what the node has, or a root volume smaller than its reservations,
    leave 0 of that resource (never negative, never a token amount)."""
    kubelet = KubeletSettings(
        system_reserved_cpu_millis=5000, system_reserved_memory_bytes=64 * GIB
    )
    result = allocatable(M5_LARGE, kubelet, root_volume_bytes=1 * GIB)
    assert (result.cpu_millis, result.memory_bytes, result.ephemeral_storage_bytes) == (0, 0, 0)


def test_an_odd_root_volume_size_gives_whole_bytes() -> None:
    """nodefs eviction is a whole number of bytes (10 % of 20 GiB + 7 bytes, rounded down)."""
    root = 20 * GIB + 7
    result = allocatable(M5_LARGE, root_volume_bytes=root)
    expected = root - (root * 10 // 100) - 1 * GIB
    assert result.ephemeral_storage_bytes == expected
    assert isinstance(result.ephemeral_storage_bytes, int)
