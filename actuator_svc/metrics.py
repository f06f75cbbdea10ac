"""Prometheus metrics of the actuator, on a registry of its own (one per server instance)."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

_FLEET_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class ActuatorMetrics:
    """Launches, ICE by offering, CreateFleet latency, unavailable offerings, RPCs, events."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.launches = Counter(
            "daiku_actuator_launches",
            "NodeClaim launches by outcome.",
            ["capacity_type", "outcome"],
            registry=self.registry,
        )
        self.unavailable_offering_errors = Counter(
            "daiku_actuator_unavailable_offering_errors",
            "Offerings that failed for lack of capacity (ICE and the like).",
            ["instance_type", "zone", "capacity_type", "error_code"],
            registry=self.registry,
        )
        self.create_fleet_seconds = Histogram(
            "daiku_actuator_create_fleet_duration_seconds",
            "Latency of CreateFleet calls.",
            ["capacity_type"],
            buckets=_FLEET_BUCKETS,
            registry=self.registry,
        )
        self.unavailable_offerings = Gauge(
            "daiku_actuator_unavailable_offerings",
            "Offerings in the unavailable-offerings cache.",
            registry=self.registry,
        )
        self.rpc_seconds = Histogram(
            "daiku_actuator_rpc_duration_seconds",
            "Latency of gRPC calls by method and status code.",
            ["method", "code"],
            registry=self.registry,
        )
        self.cloud_events = Counter(
            "daiku_actuator_cloud_events",
            "Cloud events received from the interruption queue.",
            ["kind"],
            registry=self.registry,
        )

    def track_unavailable_offerings(self, count: Callable[[], int]) -> None:
        """Report the cache size at scrape time."""
        self.unavailable_offerings.set_function(lambda: float(count()))
