"""Quantity strings to base units and back."""

from actuator_svc.core.kubelet import kubelet_settings
from actuator_svc.core.quantities import format_bytes, format_cpu, parse_bytes, parse_cpu_millis


def test_round_trips() -> None:
    """Kubernetes quantities parse to base units and format back the way kubectl shows them."""
    assert parse_cpu_millis("1930m") == 1930
    assert parse_cpu_millis("2") == 2000
    assert parse_bytes("6903Mi") == 6903 * 1024**2
    assert parse_bytes("1G") == 10**9
    assert format_cpu(1930) == "1930m"
    assert format_cpu(2000) == "2"
    assert format_bytes(20 * 1024**3) == "20Gi"
    assert format_bytes(7577 * 1024**2) == "7577Mi"


def test_kubelet_block_converts_reserved_and_eviction() -> None:
    """Reserved cpu/memory and eviction thresholds become base units."""
    settings = kubelet_settings(
        field="kubelet",
        max_pods=110,
        system_reserved={"cpu": "100m", "memory": "100Mi"},
        eviction_hard={"memory.available": "200Mi", "nodefs.available": "15%"},
    )
    assert settings.max_pods == 110
    assert settings.system_reserved_cpu_millis == 100
    assert settings.system_reserved_memory_bytes == 100 * 1024**2
    assert settings.eviction_memory_bytes == 200 * 1024**2
    assert settings.eviction_nodefs_percent == 15
