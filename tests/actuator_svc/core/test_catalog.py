"""The catalog builder: shapes, labels, allocatable and offerings from EC2-shaped data."""

from actuator_svc.core.allocatable import MIB
from actuator_svc.core.catalog import build_catalog, is_current_generation
from actuator_svc.core.offerings import OfferingKey
from actuator_svc.core.unavailable_offerings import Unavailability

M5_LARGE = {
    "InstanceType": "m5.large",
    "Hypervisor": "nitro",
    "SupportedUsageClasses": ["on-demand", "spot"],
    "ProcessorInfo": {"SupportedArchitectures": ["x86_64"], "Manufacturer": "Intel"},
    "VCpuInfo": {"DefaultVCpus": 2},
    "MemoryInfo": {"SizeInMiB": 8192},
    "NetworkInfo": {"MaximumNetworkInterfaces": 3, "Ipv4AddressesPerInterface": 10},
}
G5_XLARGE = {
    "InstanceType": "g5.xlarge",
    "ProcessorInfo": {"SupportedArchitectures": ["x86_64"]},
    "VCpuInfo": {"DefaultVCpus": 4},
    "MemoryInfo": {"SizeInMiB": 16384},
    "NetworkInfo": {"MaximumNetworkInterfaces": 4, "Ipv4AddressesPerInterface": 15},
    "GpuInfo": {"Gpus": [{"Name": "A10G", "Manufacturer": "NVIDIA", "Count": 1,
                          "MemoryInfo": {"SizeInMiB": 24576}}]},
}  # fmt: skip


def test_m5_large_matches_facts() -> None:
    """m5.large: capacity 2 cpu / 7577Mi / 29 pods, allocatable 1930m / 6903Mi / 29 (FACTS §1)."""
    types, problems = build_catalog(
        descriptions={"m5.large": M5_LARGE},
        zones={"m5.large": ["us-east-1a"]},
        on_demand_prices={"m5.large": 0.096},
        spot_prices={("m5.large", "us-east-1a"): 0.04},
        unavailable={},
    )
    assert problems == []
    (m5,) = types
    assert (m5.capacity.cpu_millis, m5.capacity.memory_bytes, m5.capacity.pods) == (
        2000, 7577 * MIB, 29,
    )  # fmt: skip
    assert (m5.allocatable.cpu_millis, m5.allocatable.memory_bytes) == (1930, 6903 * MIB)
    assert m5.labels["kubernetes.io/arch"] == "amd64"
    assert m5.labels["karpenter.k8s.aws/instance-category"] == "m"
    assert m5.labels["karpenter.k8s.aws/instance-generation"] == "5"
    assert m5.labels["karpenter.k8s.aws/instance-size"] == "large"
    assert [(o.key.capacity_type, o.price_per_hour) for o in m5.offerings] == [
        ("spot", 0.04), ("on-demand", 0.096),
    ]  # fmt: skip


def test_gpu_types_report_gpu_capacity_and_labels() -> None:
    """A GPU type carries nvidia.com/gpu in capacity and the gpu labels."""
    types, _ = build_catalog(
        descriptions={"g5.xlarge": G5_XLARGE},
        zones={"g5.xlarge": ["us-east-1a"]},
        on_demand_prices={"g5.xlarge": 1.006},
        spot_prices={},
        unavailable={},
    )
    (g5,) = types
    assert g5.capacity.extended == {"nvidia.com/gpu": 1}
    assert g5.labels["karpenter.k8s.aws/instance-gpu-count"] == "1"
    assert g5.labels["karpenter.k8s.aws/instance-gpu-name"] == "a10g"


def test_unavailable_offerings_are_reported_not_hidden() -> None:
    """An ICE'd offering stays in the catalog with available=False, its reason and expiry."""
    key = OfferingKey("m5.large", "us-east-1a", "spot")
    types, _ = build_catalog(
        descriptions={"m5.large": M5_LARGE},
        zones={"m5.large": ["us-east-1a"]},
        on_demand_prices={"m5.large": 0.096},
        spot_prices={("m5.large", "us-east-1a"): 0.04},
        unavailable={key: Unavailability("InsufficientInstanceCapacity", 99.0)},
    )
    spot = next(o for o in types[0].offerings if o.key == key)
    assert not spot.available
    assert spot.unavailable_reason == "InsufficientInstanceCapacity"
    assert spot.unavailable_until_seconds == 99.0


def test_types_without_price_or_data_are_left_out() -> None:
    """A type with no price is not listed; one with broken data is named in the problems."""
    broken = {"InstanceType": "x9.large", "ProcessorInfo": {"SupportedArchitectures": ["x86_64"]}}
    types, problems = build_catalog(
        descriptions={"m5.large": M5_LARGE, "x9.large": broken},
        zones={"m5.large": ["us-east-1a"], "x9.large": ["us-east-1a"]},
        on_demand_prices={"x9.large": 1.0},
        spot_prices={},
        unavailable={},
    )
    assert types == []
    assert len(problems) == 1
    assert problems[0].startswith("x9.large")


def test_previous_generation_families() -> None:
    """m4 and t2 are previous generation; m5 and c7g are current."""
    assert not is_current_generation("m4.large")
    assert not is_current_generation("t2.micro")
    assert is_current_generation("m5.large")
    assert is_current_generation("c7g.large")
