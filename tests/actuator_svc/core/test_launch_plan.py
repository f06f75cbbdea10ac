"""Launch-plan ordering: which offerings each CreateFleet call carries."""

from actuator_svc.core.launch_plan import MAX_OVERRIDES_PER_FLEET, next_batch
from actuator_svc.core.offerings import OfferingKey


def spot(t: str, z: str = "us-east-1a") -> OfferingKey:
    return OfferingKey(t, z, "spot")


def od(t: str, z: str = "us-east-1a") -> OfferingKey:
    return OfferingKey(t, z, "on-demand")


def test_batch_takes_the_first_capacity_type_in_claim_order() -> None:
    """The batch holds every open offering of the most preferred offering's capacity type."""
    batch = next_batch([spot("m5.large"), od("m5.large"), spot("c5.large")], excluded=set())
    assert batch is not None
    assert batch.capacity_type == "spot"
    assert batch.offerings == (spot("m5.large"), spot("c5.large"))
    assert batch.allocation_strategy == "price-capacity-optimized"


def test_spot_exhausted_falls_back_to_on_demand_in_order() -> None:
    """When every spot offering is excluded the next batch is on-demand, prioritized."""
    requested = [spot("m5.large"), spot("c5.large"), od("c5.large"), od("m5.large")]
    batch = next_batch(requested, excluded={spot("m5.large"), spot("c5.large")})
    assert batch is not None
    assert batch.capacity_type == "on-demand"
    assert batch.offerings == (od("c5.large"), od("m5.large"))
    assert batch.allocation_strategy == "prioritized"


def test_nothing_left_gives_none() -> None:
    """With every offering excluded there is no batch."""
    assert next_batch([spot("m5.large")], excluded={spot("m5.large")}) is None


def test_batches_hold_at_most_sixty_overrides() -> None:
    """A claim with 100 offerings is sent 60 at a time, duplicates dropped."""
    requested = [spot(f"m5.{i}xlarge") for i in range(100)] + [spot("m5.0xlarge")]
    first = next_batch(requested, excluded=set())
    assert first is not None
    assert len(first.offerings) == MAX_OVERRIDES_PER_FLEET
    second = next_batch(requested, excluded=set(first.offerings))
    assert second is not None
    assert len(second.offerings) == 40
