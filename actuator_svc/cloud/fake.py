"""An in-memory CloudProvider for tests (ours and users'): no network, same contract.

Pools can be marked out of capacity; CreateFleet then reports them in its errors and launches
from the next pool in the order its allocation strategy implies (spot: cheapest first; on-demand
prioritized: claim order), like an instant fleet on AWS. ClientTokens are idempotent.
"""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import itertools
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from actuator_svc.cloud.provider import (
    CapacityReservation,
    FleetError,
    FleetRequest,
    FleetResult,
    Image,
    Instance,
    LaunchTemplate,
    QueueMessage,
    SecurityGroup,
    Subnet,
)
from actuator_svc.core.fleet_errors import IDEMPOTENT_PARAMETER_MISMATCH, is_capacity_type_wide
from actuator_svc.core.launch_template import LaunchTemplateConfig
from actuator_svc.core.node_class import (
    CapacityReservationTerm,
    ImageTerm,
    SecurityGroupTerm,
    SubnetTerm,
)
from actuator_svc.core.offerings import SPOT, OfferingKey
from actuator_svc.errors import CloudError, CloudPermanentError

if TYPE_CHECKING:
    from actuator_svc.cloud.provider import CloudProvider

_ALIAS_NAMES = {"al2023": "amazon-eks-node-al2023-*-standard-*"}


@dataclass
class FakeSecurityGroup:
    id: str
    name: str
    tags: dict[str, str] = field(default_factory=dict)


@dataclass
class FakeImage:
    id: str
    name: str
    architecture: str
    creation_date: str
    tags: dict[str, str] = field(default_factory=dict)


def _matches(tags: Mapping[str, str], wanted: Mapping[str, str]) -> bool:
    return all(k in tags and (v == "*" or tags[k] == v) for k, v in wanted.items())


class FakeCloud:
    """CloudProvider in memory. Seed it through the constructor and the public attributes."""

    def __init__(
        self,
        *,
        instance_types: Mapping[str, dict[str, Any]],
        zones: Mapping[str, list[str]],
        on_demand_prices: Mapping[str, float],
        spot_prices: Mapping[tuple[str, str], float] | None = None,
    ) -> None:
        self.instance_types = dict(instance_types)
        self.zones = dict(zones)
        self.od_prices = dict(on_demand_prices)
        self.spot = dict(spot_prices or {})
        self.subnets: list[tuple[Subnet, dict[str, str]]] = []
        # (reservation, its tags): what find_capacity_reservations selects from.
        self.capacity_reservations: list[tuple[CapacityReservation, dict[str, str]]] = []
        self.security_groups: list[FakeSecurityGroup] = []
        self.images: list[FakeImage] = []
        self.launch_templates: dict[str, LaunchTemplateConfig] = {}
        self.launch_template_created: dict[str, float] = {}
        # When the fake says things happen (launch template CreateTime); tests may replace it.
        self.now: Callable[[], float] = time.time
        self.instances: dict[str, Instance] = {}
        self.exhausted: dict[OfferingKey, str] = {}
        self.fleet_requests: list[FleetRequest] = []
        self.queues: dict[str, list[QueueMessage]] = {}  # visible messages
        self.in_flight: dict[str, dict[str, QueueMessage]] = {}  # received, by receipt handle
        self.polls_started = 0  # receive_messages calls, counted as they begin
        self.messages_received = 0  # messages receive_messages returned
        self.pending_faults: dict[str, list[CloudError]] = {}
        # ClientToken -> (the call's parameters, its answer), as EC2 keeps them.
        self._tokens: dict[str, tuple[FleetRequest, FleetResult]] = {}
        self._ids = itertools.count(1)
        self._arrivals: dict[str, asyncio.Event] = {}

    # Test controls -------------------------------------------------------------------------

    def set_capacity(self, key: OfferingKey, *, available: bool, code: str = "") -> None:
        """Mark a pool as out of capacity (failing with `code`) or back in."""
        if available:
            self.exhausted.pop(key, None)
        else:
            self.exhausted[key] = code or "InsufficientInstanceCapacity"

    def fail_next(self, operation: str, error: CloudError) -> None:
        """Make the next call of `operation` (a method name) raise `error`."""
        self.pending_faults.setdefault(operation, []).append(error)

    def _fault(self, operation: str) -> None:
        faults = self.pending_faults.get(operation)
        if faults:
            raise faults.pop(0)

    # CloudProvider -------------------------------------------------------------------------

    async def describe_instance_types(self) -> dict[str, dict[str, Any]]:
        self._fault("describe_instance_types")
        return dict(self.instance_types)

    async def instance_type_zones(self) -> dict[str, list[str]]:
        return {k: list(v) for k, v in self.zones.items()}

    async def on_demand_prices(self) -> dict[str, float]:
        self._fault("on_demand_prices")
        return dict(self.od_prices)

    async def spot_prices(self) -> dict[tuple[str, str], float]:
        return dict(self.spot)

    async def find_subnets(self, terms: Sequence[SubnetTerm]) -> list[Subnet]:
        return [
            s
            for s, tags in self.subnets
            if any((t.id and t.id == s.id) or (not t.id and _matches(tags, t.tags)) for t in terms)
        ]

    async def find_security_groups(self, terms: Sequence[SecurityGroupTerm]) -> list[SecurityGroup]:
        found = sorted(
            (g.id, g.name)
            for g in self.security_groups
            if any(
                (t.id and t.id == g.id)
                or (t.name and t.name == g.name)
                or (not t.id and not t.name and _matches(g.tags, t.tags))
                for t in terms
            )
        )
        return [SecurityGroup(i, name) for i, name in found]

    async def find_capacity_reservations(
        self, terms: Sequence[CapacityReservationTerm]
    ) -> list[CapacityReservation]:
        return [
            r
            for r, tags in self.capacity_reservations
            if any(
                (t.id == r.id if t.id else _matches(tags, t.tags))
                and (not t.owner_id or t.owner_id == r.owner_id)
                for t in terms
            )
        ]

    async def find_images(self, terms: Sequence[ImageTerm]) -> list[Image]:
        found = []
        for image in self.images:
            for t in terms:
                pattern = t.name or _ALIAS_NAMES.get(t.alias.partition("@")[0], "")
                if (
                    (not t.id or t.id == image.id)
                    and (not pattern or fnmatch.fnmatch(image.name, pattern))
                    and _matches(image.tags, t.tags)
                ):
                    found.append(
                        Image(image.id, image.name, image.architecture, image.creation_date)
                    )
                    break
        return found

    async def ensure_launch_template(self, config: LaunchTemplateConfig) -> None:
        self._fault("ensure_launch_template")
        if config.name not in self.launch_templates:
            self.launch_templates[config.name] = config
            self.launch_template_created[config.name] = self.now()

    async def find_launch_templates(self, tags: Mapping[str, str]) -> list[LaunchTemplate]:
        return [
            LaunchTemplate(name, self.launch_template_created[name])
            for name, config in self.launch_templates.items()
            if _matches(config.tags, tags)
        ]

    async def delete_launch_template(self, name: str) -> None:
        self.launch_templates.pop(name, None)

    async def create_fleet(self, request: FleetRequest) -> FleetResult:
        self._fault("create_fleet")
        self.fleet_requests.append(request)
        if (seen := self._tokens.get(request.client_token)) is not None:
            if replace(seen[0], client_token="") != replace(request, client_token=""):
                raise CloudPermanentError(
                    "CreateFleet",
                    IDEMPOTENT_PARAMETER_MISMATCH,
                    f"The client token {request.client_token} was used with other parameters.",
                )
            return seen[1]
        overrides = [o for t in request.templates for o in t.overrides]
        template_groups = {
            id(o): (
                config.security_group_ids
                if (config := self.launch_templates.get(t.launch_template_name))
                else ()
            )
            for t in request.templates
            for o in t.overrides
        }
        if request.capacity_type == SPOT:
            overrides.sort(key=lambda o: self.spot.get((o.instance_type, o.zone), 1e9))
        else:
            overrides.sort(key=lambda o: o.priority)
        errors = []
        result: FleetResult | None = None
        for override in overrides:
            key = OfferingKey(override.instance_type, override.zone, request.capacity_type)
            code = self.exhausted.get(key)
            if code is not None:
                errors.append(FleetError(key.instance_type, key.zone, code, f"no capacity: {key}"))
                if is_capacity_type_wide(code):
                    break  # an account-wide limit: EC2 tries no other pool of the type
                continue
            instance = Instance(
                id=f"i-{next(self._ids):017x}",
                instance_type=key.instance_type,
                zone=key.zone,
                capacity_type=request.capacity_type,
                state="running",
                image_id="",
                launch_time=datetime.now(tz=UTC),
                tags=dict(request.tags),
                subnet_id=override.subnet_id,
                security_group_ids=tuple(sorted(set(template_groups[id(override)]))),
            )
            self.instances[instance.id] = instance
            result = FleetResult(instance.id, key.instance_type, key.zone, tuple(errors))
            break
        if result is None:
            result = FleetResult(None, "", "", tuple(errors))
        self._tokens[request.client_token] = (request, result)
        return result

    async def find_instances(
        self,
        tags: Mapping[str, str],
        *,
        include_terminated: bool = False,
        instance_ids: Sequence[str] | None = None,
    ) -> list[Instance]:
        wanted = None if instance_ids is None else set(instance_ids)
        return [
            i
            for i in self.instances.values()
            if _matches(i.tags, tags)
            and (include_terminated or i.state != "terminated")
            and (wanted is None or i.id in wanted)
        ]

    async def terminate_instances(self, instance_ids: Sequence[str]) -> dict[str, str]:
        states = {}
        for instance_id in instance_ids:
            if instance_id not in self.instances:
                raise CloudPermanentError(
                    "TerminateInstances", "InvalidInstanceID.NotFound", instance_id
                )
            instance = self.instances[instance_id]
            state = "shutting-down" if instance.state != "terminated" else "terminated"
            self.instances[instance_id] = replace(instance, state=state)
            states[instance_id] = state
        return states

    async def queue_url(self, queue: str) -> str:
        return queue if queue.startswith("http") else f"http://fake-sqs/{queue}"

    def send_message(self, queue_url: str, body: str) -> None:
        """Put a message on a queue (as EventBridge would)."""
        handle = f"rh-{next(self._ids)}"
        self.queues.setdefault(queue_url, []).append(QueueMessage(handle, body))
        self._arrivals.setdefault(queue_url, asyncio.Event()).set()

    async def receive_messages(self, queue_url: str, wait_seconds: int) -> list[QueueMessage]:
        """Long polling: wait up to `wait_seconds` for a message. Received messages stay
        invisible (in `in_flight`) until deleted or released; no visibility timeout runs out."""
        self.polls_started += 1
        arrived = self._arrivals.setdefault(queue_url, asyncio.Event())
        if not self.queues.get(queue_url):
            arrived.clear()
            # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancellation that
            # arrives as the event is set (bpo-42130), and a cancelled poller would run on.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait_seconds):
                    await arrived.wait()
        visible = self.queues.get(queue_url, [])
        received, self.queues[queue_url] = visible[:10], visible[10:]
        self.in_flight.setdefault(queue_url, {}).update((m.receipt_handle, m) for m in received)
        self.messages_received += len(received)
        return received

    async def delete_message(self, queue_url: str, receipt_handle: str) -> None:
        self.in_flight.get(queue_url, {}).pop(receipt_handle, None)

    async def release_message(self, queue_url: str, receipt_handle: str) -> None:
        message = self.in_flight.get(queue_url, {}).pop(receipt_handle, None)
        if message is not None:
            self.queues.setdefault(queue_url, []).append(message)
            self._arrivals.setdefault(queue_url, asyncio.Event()).set()


if TYPE_CHECKING:
    _: CloudProvider = FakeCloud(instance_types={}, zones={}, on_demand_prices={})
