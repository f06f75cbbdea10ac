"""A growing root volume: the smallest whole-GiB volume that holds a claim's ephemeral-storage,
from the class's volumeSize up to its maxVolumeSize, with allocatable as the actuator counts it."""

from __future__ import annotations

import pytest

from actuator_svc.core.allocatable import InstanceShape, KubeletSettings, allocatable
from scheduler_svc.core.nodeclass import BlockDeviceMapping, KubeletSpec, NodeClassSpec
from scheduler_svc.core.root_volume import (
    GIB,
    RootVolumeGrowth,
    ephemeral_allocatable_bytes,
    nodefs_eviction_percent,
)

SHAPE = InstanceShape("m5.large", vcpus=2, memory_mib=8192, max_enis=3, ipv4_per_eni=10)


@pytest.mark.parametrize("volume_gib", [8, 20, 57, 100, 1000])
@pytest.mark.parametrize("percent", [5, 10, 15])
def test_allocatable_is_what_the_actuator_counts(volume_gib: int, percent: int) -> None:
    """The scheduler's count of a volume's allocatable ephemeral-storage is the actuator's (the
    two services may not import each other, so this test holds them together)."""
    kubelet = KubeletSettings(eviction_nodefs_percent=percent)
    actuator = allocatable(SHAPE, kubelet, volume_gib * GIB).ephemeral_storage_bytes
    assert ephemeral_allocatable_bytes(volume_gib * GIB, percent) == actuator


GROWTH = RootVolumeGrowth(base_bytes=20 * GIB, max_bytes=200 * GIB)


@pytest.mark.parametrize("requested_gib", [0, 1, 17, 17.5, 30, 100, 179])
def test_the_volume_is_the_smallest_whole_gib_that_holds_the_request(
    requested_gib: float,
) -> None:
    requested = int(requested_gib * GIB)
    size = GROWTH.size_for(requested)
    assert size % GIB == 0
    assert size >= GROWTH.base_bytes
    assert ephemeral_allocatable_bytes(size, 10) >= requested
    if size > GROWTH.base_bytes:
        assert ephemeral_allocatable_bytes(size - GIB, 10) < requested


def test_the_volume_never_passes_the_cap() -> None:
    assert GROWTH.size_for(500 * GIB) == 200 * GIB
    assert GROWTH.max_allocatable_bytes == 179 * GIB


def _node_class(*mappings: BlockDeviceMapping) -> NodeClassSpec:
    return NodeClassSpec(name="default", block_device_mappings=mappings)


def test_only_a_root_mapping_with_a_cap_grows() -> None:
    root = BlockDeviceMapping("/dev/xvda", True, 50 * GIB, max_volume_size_bytes=500 * GIB)
    data = BlockDeviceMapping("/dev/xvdb", False, 10 * GIB)
    node_class = _node_class(root, data)
    growth = RootVolumeGrowth.of(
        node_class, KubeletSpec(eviction_hard=(("nodefs.available", "15%"),))
    )
    assert growth == RootVolumeGrowth(50 * GIB, 500 * GIB, 15)
    grown = node_class.with_root_volume_size(80 * GIB)
    assert [m.volume_size_bytes for m in grown.block_device_mappings] == [80 * GIB, 10 * GIB]
    assert (
        RootVolumeGrowth.of(_node_class(BlockDeviceMapping("/dev/xvda", True, GIB)), None) is None
    )


def test_eviction_percent_defaults_to_ten() -> None:
    assert nodefs_eviction_percent(None) == 10
    assert nodefs_eviction_percent(KubeletSpec(eviction_hard=(("memory.available", "5%"),))) == 10
