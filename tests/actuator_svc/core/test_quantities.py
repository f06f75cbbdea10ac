"""Quantity strings to base units and back."""

import time

import pytest

from actuator_svc.core.kubelet import KubeletSettingError, kubelet_settings
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


@pytest.mark.parametrize("text", ["1e999990", "1e40", "9223372036854775808", "90Ei"])
def test_huge_quantities_are_refused_at_once(text: str) -> None:
    """A quantity beyond int64 (however short its text) is a ValueError in well under 100 ms
    of CPU, never a long computation."""
    started = time.process_time()
    with pytest.raises(ValueError, match=r"out of range|not a Kubernetes quantity"):
        parse_cpu_millis(text)
    assert time.process_time() - started < 0.1


def test_long_quantity_text_is_refused_without_echoing_it() -> None:
    """A megabyte of digits is refused by its length; the message does not repeat it."""
    with pytest.raises(ValueError, match="at most 64 characters") as info:
        parse_bytes("1" * 1_000_000)
    assert len(str(info.value)) < 100


@pytest.mark.parametrize(
    ("block", "field"),
    [
        ({"system_reserved": {"cpu": "-5"}}, "kubelet.system_reserved['cpu']"),
        ({"kube_reserved": {"memory": "-1Gi"}}, "kubelet.kube_reserved['memory']"),
        ({"system_reserved": {"cpu": "1e999990"}}, "kubelet.system_reserved['cpu']"),
        ({"system_reserved": {"pid": "lots"}}, "kubelet.system_reserved['pid']"),
        (
            {"eviction_hard": {"memory.available": "-1"}},
            "kubelet.eviction_hard['memory.available']",
        ),
        (
            {"eviction_hard": {"nodefs.available": "1e999%"}},
            "kubelet.eviction_hard['nodefs.available']",
        ),
        (
            {"eviction_hard": {"nodefs.available": "101%"}},
            "kubelet.eviction_hard['nodefs.available']",
        ),
    ],
)
def test_negative_huge_and_malformed_kubelet_values_name_the_field(
    block: dict[str, dict[str, str]], field: str
) -> None:
    """Negative reserves (which made allocatable exceed capacity), out-of-range quantities and
    malformed percentages are KubeletSettingErrors naming the setting."""
    with pytest.raises(KubeletSettingError) as info:
        kubelet_settings(field="kubelet", **block)  # type: ignore[arg-type]
    assert info.value.field == field
