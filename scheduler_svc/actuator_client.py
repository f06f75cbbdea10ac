"""A typed façade over the actuator's gRPC API (`daiku.actuator.v1.Actuator`).

Every call carries the bearer token and a deadline; protobuf messages stop here: callers get the
core's `InstanceType` and this module's frozen dataclasses, and failures arrive as the
`scheduler_svc.errors.ActuatorError` subclasses (see that module's tree):

- `launch_nodeclaim` is idempotent per NodeClaim name (the actuator's contract), so a retry after
  `UnavailableError` never launches a second instance. `ResourceExhaustedError` means every
  offering failed; its `failed_offerings` name them.
- `terminate_nodeclaim` raises `NotFoundError` for a claim that never had an instance: callers
  treat that as done.
- UNAVAILABLE answers are retried by the gRPC channel itself (a few attempts with backoff,
  every method being idempotent) before `UnavailableError` is raised.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Protocol

import grpc
from google.protobuf.timestamp_pb2 import Timestamp
from grpc_health.v1 import health_pb2, health_pb2_grpc  # type: ignore[import-untyped]  # no stubs
from grpc_status import rpc_status

from daiku.actuator.v1 import actuator_pb2, actuator_pb2_grpc
from scheduler_svc.core.model import InstanceType, Offering, Resources
from scheduler_svc.core.nodeclass import KubeletSpec, NodeClassSpec
from scheduler_svc.core.reservations import CapacityReservation
from scheduler_svc.errors import (
    ActuatorError,
    DeadlineExceededError,
    FailedOffering,
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
    ResourceExhaustedError,
    UnauthenticatedError,
    UnavailableError,
)

# -- what callers pass ------------------------------------------------------------------------


class OfferingChoice(Protocol):
    """Where to launch: the core's `OfferingOption` fits."""

    @property
    def instance_type(self) -> str: ...
    @property
    def zone(self) -> str: ...
    @property
    def capacity_type(self) -> str: ...
    @property
    def capacity_reservation_id(self) -> str: ...
    @property
    def capacity_reservation_type(self) -> str: ...


class TaintSpec(Protocol):
    """A taint the node registers with: the core's `Taint` fits."""

    @property
    def key(self) -> str: ...
    @property
    def value(self) -> str: ...
    @property
    def effect(self) -> str: ...


# -- what callers get -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LaunchAttempt:
    """One CreateFleet call of a launch: the offerings it sent and those that failed."""

    started_at: datetime | None
    ended_at: datetime | None
    offerings: tuple[tuple[str, str, str], ...]  # (instance_type, zone, capacity_type)
    failed_offerings: tuple[FailedOffering, ...]


@dataclass(frozen=True, slots=True)
class LaunchedInstance:
    """The instance a NodeClaim got. `attempts` is empty for an idempotent repeat.
    `subnet_id`/`security_group_ids` (sorted): where it runs (empty: an actuator that does
    not report them)."""

    nodeclaim_name: str
    provider_id: str
    instance_id: str
    instance_type: str
    zone: str
    capacity_type: str
    price_per_hour: float
    image_id: str
    launch_time: datetime | None
    attempts: tuple[LaunchAttempt, ...]
    subnet_id: str = ""
    security_group_ids: tuple[str, ...] = ()
    capacity_reservation_id: str = ""
    capacity_reservation_type: str = ""


@dataclass(frozen=True, slots=True)
class TerminatedInstance:
    """The instance of a terminated claim and its EC2 state after the call."""

    instance_id: str
    state: str


@dataclass(frozen=True, slots=True)
class CloudInstance:
    """An instance tagged for the cluster, as the actuator sees it (EC2 `state`)."""

    nodeclaim_name: str
    nodepool_name: str
    provider_id: str
    instance_id: str
    instance_type: str
    zone: str
    capacity_type: str
    state: str
    launch_time: datetime | None
    image_id: str
    tags: Mapping[str, str]
    subnet_id: str = ""
    security_group_ids: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ResolvedSubnet:
    id: str
    zone: str
    zone_id: str


@dataclass(frozen=True, slots=True)
class ResolvedSecurityGroup:
    id: str
    name: str


@dataclass(frozen=True, slots=True)
class ResolvedAmi:
    """An AMI a launch uses, and the nodes it is for: (key, operator, values) requirements."""

    id: str
    name: str
    requirements: tuple[tuple[str, str, tuple[str, ...]], ...]


@dataclass(frozen=True, slots=True)
class NodeClassResolution:
    """What an EC2NodeClass's selector terms select now (ResolveNodeClass)."""

    subnets: tuple[ResolvedSubnet, ...]
    security_groups: tuple[ResolvedSecurityGroup, ...]
    amis: tuple[ResolvedAmi, ...]
    capacity_reservations: tuple[CapacityReservation, ...] = ()


class CloudEventKind(StrEnum):
    SPOT_INTERRUPTION_WARNING = "SpotInterruptionWarning"
    REBALANCE_RECOMMENDATION = "RebalanceRecommendation"
    SCHEDULED_CHANGE = "ScheduledChange"
    INSTANCE_STATE_CHANGE = "InstanceStateChange"
    UNSPECIFIED = "Unspecified"


_EVENT_KINDS = {
    actuator_pb2.CLOUD_EVENT_KIND_SPOT_INTERRUPTION_WARNING: (
        CloudEventKind.SPOT_INTERRUPTION_WARNING
    ),
    actuator_pb2.CLOUD_EVENT_KIND_REBALANCE_RECOMMENDATION: CloudEventKind.REBALANCE_RECOMMENDATION,
    actuator_pb2.CLOUD_EVENT_KIND_SCHEDULED_CHANGE: CloudEventKind.SCHEDULED_CHANGE,
    actuator_pb2.CLOUD_EVENT_KIND_INSTANCE_STATE_CHANGE: CloudEventKind.INSTANCE_STATE_CHANGE,
}


@dataclass(frozen=True, slots=True)
class CloudEvent:
    """An interruption or state change of one instance. `nodeclaim_name` is "" for instances
    not tagged with a claim; `deadline` is when a spot instance will be reclaimed."""

    id: str
    kind: CloudEventKind
    instance_id: str
    provider_id: str
    nodeclaim_name: str
    instance_state: str
    time: datetime | None
    deadline: datetime | None
    offering: tuple[str, str, str] | None  # (instance_type, zone, capacity_type)
    ack_token: str = ""  # AcknowledgeCloudEvents takes it once the event was acted on


# -- connection -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TlsFiles:
    """TLS for the channel: `ca_file` verifies the actuator; `cert_file` + `key_file` make it
    mTLS; `server_name` overrides the name checked against the certificate."""

    ca_file: Path | None = None
    cert_file: Path | None = None
    key_file: Path | None = None
    server_name: str | None = None


@dataclass(frozen=True, slots=True)
class ActuatorDeadlines:
    """Per-call deadlines. Launch is long: the actuator may walk many offerings, one CreateFleet
    each, before answering."""

    list_instance_types_seconds: float = 30.0
    launch_nodeclaim_seconds: float = 120.0
    terminate_nodeclaim_seconds: float = 30.0
    get_nodeclaim_seconds: float = 10.0
    list_nodeclaims_seconds: float = 30.0
    resolve_node_class_seconds: float = 30.0
    acknowledge_cloud_events_seconds: float = 10.0


SERVICE_NAME = "daiku.actuator.v1.Actuator"
_SERVING_POLL_SECONDS = 0.1

# The channel retries UNAVAILABLE itself: every Actuator method is idempotent (launch per
# NodeClaim name), so a retry can never double an instance.
_SERVICE_CONFIG = json.dumps(
    {
        "methodConfig": [
            {
                "name": [{"service": SERVICE_NAME}],
                "retryPolicy": {
                    "maxAttempts": 3,
                    "initialBackoff": "0.1s",
                    "maxBackoff": "1s",
                    "backoffMultiplier": 2,
                    "retryableStatusCodes": ["UNAVAILABLE"],
                },
            }
        ]
    }
)

_ERRORS: dict[grpc.StatusCode, type[ActuatorError]] = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgumentError,
    grpc.StatusCode.NOT_FOUND: NotFoundError,
    grpc.StatusCode.UNAVAILABLE: UnavailableError,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceededError,
    grpc.StatusCode.FAILED_PRECONDITION: FailedPreconditionError,
    grpc.StatusCode.UNAUTHENTICATED: UnauthenticatedError,
}


def open_channel(address: str, *, tls: TlsFiles | None = None) -> grpc.aio.Channel:
    """A channel to `address` ("host:port"), TLS when `tls` is given, with UNAVAILABLE retries."""
    options: list[tuple[str, str | int]] = [
        ("grpc.service_config", _SERVICE_CONFIG),
        ("grpc.enable_retries", 1),
        ("grpc.keepalive_time_ms", 30_000),
        # gRPC's default reconnect backoff (1 s, x1.6, up to 120 s) kept calls failing with
        # "failed to connect to all addresses" seconds after an actuator that started late
        # was serving; retry the connection soon instead (a refused connect costs nothing).
        ("grpc.initial_reconnect_backoff_ms", 100),
        ("grpc.max_reconnect_backoff_ms", 5_000),
    ]
    if tls is None:
        return grpc.aio.insecure_channel(address, options=options)
    if tls.server_name:
        options.append(("grpc.ssl_target_name_override", tls.server_name))
    credentials = grpc.ssl_channel_credentials(
        root_certificates=tls.ca_file.read_bytes() if tls.ca_file else None,
        private_key=tls.key_file.read_bytes() if tls.key_file else None,
        certificate_chain=tls.cert_file.read_bytes() if tls.cert_file else None,
    )
    return grpc.aio.secure_channel(address, credentials, options=options)


class ActuatorClient:
    """Calls the actuator over `channel`. Use `ActuatorClient.connect(...)` or pass a channel;
    `close()` (or `async with`) closes a channel the client opened."""

    def __init__(
        self,
        channel: grpc.aio.Channel,
        *,
        token: str | None = None,
        deadlines: ActuatorDeadlines | None = None,
        owns_channel: bool = False,
    ) -> None:
        self._channel = channel
        self._stub = actuator_pb2_grpc.ActuatorStub(channel)
        self._metadata: tuple[tuple[str, str], ...] = (
            (("authorization", f"Bearer {token}"),) if token else ()
        )
        self._deadlines = deadlines or ActuatorDeadlines()
        self._owns_channel = owns_channel

    @classmethod
    def connect(
        cls,
        address: str,
        *,
        token: str | None = None,
        tls: TlsFiles | None = None,
        deadlines: ActuatorDeadlines | None = None,
    ) -> ActuatorClient:
        """A client on a new channel to `address` (connects lazily, on the first call)."""
        return cls(
            open_channel(address, tls=tls), token=token, deadlines=deadlines, owns_channel=True
        )

    async def close(self) -> None:
        if self._owns_channel:
            await self._channel.close()

    async def __aenter__(self) -> ActuatorClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- calls --------------------------------------------------------------------------------

    async def is_serving(self, timeout_seconds: float = 2.0) -> bool:
        """Whether the actuator answers the standard gRPC health check as SERVING (for the
        scheduler's readiness). Never raises: unreachable or not serving is False."""
        stub = health_pb2_grpc.HealthStub(self._channel)
        try:
            response = await stub.Check(
                health_pb2.HealthCheckRequest(service=SERVICE_NAME),
                timeout=timeout_seconds,
                metadata=self._metadata,
            )
        except grpc.aio.AioRpcError:
            return False
        return bool(response.status == health_pb2.HealthCheckResponse.SERVING)

    async def wait_until_serving(self, timeout_seconds: float) -> bool:
        """Wait, at most `timeout_seconds`, for the actuator to answer its health check as
        SERVING; False when the time ran out. Rides out refused connections (wait_for_ready)
        rather than failing on the first one, as a call made while it starts would."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_seconds
        stub = health_pb2_grpc.HealthStub(self._channel)
        while (left := deadline - loop.time()) > 0:
            try:
                response = await stub.Check(
                    health_pb2.HealthCheckRequest(service=SERVICE_NAME),
                    timeout=left,
                    metadata=self._metadata,
                    wait_for_ready=True,
                )
                if response.status == health_pb2.HealthCheckResponse.SERVING:
                    return True
            except grpc.aio.AioRpcError as error:
                if error.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                    return False
            # Up but not SERVING yet (or refusing our token): ask again shortly.
            await asyncio.sleep(min(_SERVING_POLL_SECONDS, max(0.0, deadline - loop.time())))
        return False

    async def list_instance_types(
        self,
        *,
        kubelet: KubeletSpec | None = None,
        root_volume_size_bytes: int = 0,
    ) -> tuple[InstanceType, ...]:
        """Every instance type with its allocatable under `kubelet` and all its offerings
        (recently exhausted ones with available=False)."""
        request = actuator_pb2.ListInstanceTypesRequest(
            kubelet=_kubelet_to_proto(kubelet), root_volume_size_bytes=root_volume_size_bytes
        )
        try:
            response = await self._stub.ListInstanceTypes(
                request,
                timeout=self._deadlines.list_instance_types_seconds,
                metadata=self._metadata,
            )
        except grpc.aio.AioRpcError as error:
            raise _error_from(error, "ListInstanceTypes") from error
        return tuple(_instance_type_from_proto(t) for t in response.instance_types)

    async def launch_nodeclaim(
        self,
        *,
        nodeclaim_name: str,
        nodepool_name: str,
        offerings: Sequence[OfferingChoice],
        node_class: NodeClassSpec,
        labels: Mapping[str, str] | None = None,
        taints: Sequence[TaintSpec] = (),
        startup_taints: Sequence[TaintSpec] = (),
        kubelet: KubeletSpec | None = None,
        nodeclaim_uid: str = "",
    ) -> LaunchedInstance:
        """Launch the NodeClaim's instance on the first offering (most preferred first) with
        capacity. Idempotent per `nodeclaim_name` (per claim object when `nodeclaim_uid`, its
        metadata.uid, is given). Raises ResourceExhaustedError when every offering failed."""
        request = actuator_pb2.LaunchNodeClaimRequest(
            nodeclaim_name=nodeclaim_name,
            nodepool_name=nodepool_name,
            offerings=[
                actuator_pb2.Offering(
                    instance_type=o.instance_type,
                    zone=o.zone,
                    capacity_type=o.capacity_type,
                    capacity_reservation_id=o.capacity_reservation_id,
                    capacity_reservation_type=o.capacity_reservation_type,
                )
                for o in offerings
            ],
            node_class=_node_class_to_proto(node_class),
            labels=dict(labels or {}),
            taints=[_taint_to_proto(t) for t in taints],
            startup_taints=[_taint_to_proto(t) for t in startup_taints],
            kubelet=_kubelet_to_proto(kubelet),
            nodeclaim_uid=nodeclaim_uid,
        )
        try:
            response = await self._stub.LaunchNodeClaim(
                request, timeout=self._deadlines.launch_nodeclaim_seconds, metadata=self._metadata
            )
        except grpc.aio.AioRpcError as error:
            raise _error_from(error, "LaunchNodeClaim") from error
        return LaunchedInstance(
            nodeclaim_name=nodeclaim_name,
            provider_id=response.provider_id,
            instance_id=response.instance_id,
            instance_type=response.instance_type,
            zone=response.zone,
            capacity_type=response.capacity_type,
            price_per_hour=response.price,
            image_id=response.image_id,
            launch_time=_time(response, "launch_time"),
            attempts=tuple(_attempt_from_proto(a) for a in response.attempts),
            subnet_id=response.subnet_id,
            security_group_ids=tuple(sorted(response.security_group_ids)),
            capacity_reservation_id=response.capacity_reservation_id,
            capacity_reservation_type=response.capacity_reservation_type,
        )

    async def terminate_nodeclaim(self, nodeclaim_name: str) -> TerminatedInstance:
        """Terminate the claim's instance (succeeds if already terminating/terminated).
        Raises NotFoundError when the claim never had an instance: treat that as done."""
        try:
            response = await self._stub.TerminateNodeClaim(
                actuator_pb2.TerminateNodeClaimRequest(nodeclaim_name=nodeclaim_name),
                timeout=self._deadlines.terminate_nodeclaim_seconds,
                metadata=self._metadata,
            )
        except grpc.aio.AioRpcError as error:
            raise _error_from(error, "TerminateNodeClaim") from error
        return TerminatedInstance(instance_id=response.instance_id, state=response.state)

    async def get_nodeclaim(self, nodeclaim_name: str) -> CloudInstance:
        """The instance tagged with the claim; NotFoundError when there is none."""
        try:
            response = await self._stub.GetNodeClaim(
                actuator_pb2.GetNodeClaimRequest(nodeclaim_name=nodeclaim_name),
                timeout=self._deadlines.get_nodeclaim_seconds,
                metadata=self._metadata,
            )
        except grpc.aio.AioRpcError as error:
            raise _error_from(error, "GetNodeClaim") from error
        return _instance_from_proto(response.nodeclaim)

    async def list_nodeclaims(self, nodepool_name: str = "") -> tuple[CloudInstance, ...]:
        """Every instance tagged for the cluster (of one NodePool when given)."""
        try:
            response = await self._stub.ListNodeClaims(
                actuator_pb2.ListNodeClaimsRequest(nodepool_name=nodepool_name),
                timeout=self._deadlines.list_nodeclaims_seconds,
                metadata=self._metadata,
            )
        except grpc.aio.AioRpcError as error:
            raise _error_from(error, "ListNodeClaims") from error
        return tuple(_instance_from_proto(n) for n in response.nodeclaims)

    async def resolve_node_class(self, node_class: NodeClassSpec) -> NodeClassResolution:
        """What the node class's selector terms select now. FailedPreconditionError when a
        selector list matches nothing (the message starts with the field), InvalidArgumentError
        when the node class is malformed."""
        try:
            response = await self._stub.ResolveNodeClass(
                actuator_pb2.ResolveNodeClassRequest(node_class=_node_class_to_proto(node_class)),
                timeout=self._deadlines.resolve_node_class_seconds,
                metadata=self._metadata,
            )
        except grpc.aio.AioRpcError as error:
            raise _error_from(error, "ResolveNodeClass") from error
        return NodeClassResolution(
            subnets=tuple(ResolvedSubnet(s.id, s.zone, s.zone_id) for s in response.subnets),
            security_groups=tuple(
                ResolvedSecurityGroup(g.id, g.name) for g in response.security_groups
            ),
            amis=tuple(
                ResolvedAmi(
                    a.id,
                    a.name,
                    tuple((r.key, r.operator, tuple(r.values)) for r in a.requirements),
                )
                for a in response.amis
            ),
            capacity_reservations=tuple(
                _reservation_from_proto(r) for r in response.capacity_reservations
            ),
        )

    async def watch_cloud_events(self) -> AsyncIterator[CloudEvent]:
        """Cloud events as they come, each kept on the actuator's queue until
        `acknowledge_cloud_events` names it (an event not acknowledged comes again, on this or
        a later stream); the stream has no deadline. It ends by raising an ActuatorError
        (UnavailableError when the actuator goes away): callers reconnect."""
        call = self._stub.WatchCloudEvents(
            actuator_pb2.WatchCloudEventsRequest(acknowledge=True), metadata=self._metadata
        )
        try:
            async for event in call:
                yield _event_from_proto(event)
        except grpc.aio.AioRpcError as error:
            raise _error_from(error, "WatchCloudEvents") from error
        finally:
            call.cancel()

    async def acknowledge_cloud_events(self, events: Sequence[CloudEvent]) -> None:
        """These events were acted on: the actuator may delete their queue messages."""
        tokens = [e.ack_token for e in events if e.ack_token]
        if not tokens:
            return
        try:
            await self._stub.AcknowledgeCloudEvents(
                actuator_pb2.AcknowledgeCloudEventsRequest(ack_tokens=tokens),
                timeout=self._deadlines.acknowledge_cloud_events_seconds,
                metadata=self._metadata,
            )
        except grpc.aio.AioRpcError as error:
            raise _error_from(error, "AcknowledgeCloudEvents") from error


# -- conversions ------------------------------------------------------------------------------


def _error_from(error: grpc.aio.AioRpcError, method: str) -> ActuatorError:
    code = error.code()
    message = error.details() or ""
    if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
        failure = _launch_failure(error)
        return ResourceExhaustedError(
            message,
            code=code.name,
            method=method,
            nodeclaim_name=failure.nodeclaim_name if failure else "",
            failed_offerings=tuple(
                f for attempt in (failure.attempts if failure else ()) for f in _failed(attempt)
            ),
        )
    return _ERRORS.get(code, ActuatorError)(message, code=code.name, method=method)


def _launch_failure(error: grpc.aio.AioRpcError) -> actuator_pb2.LaunchNodeClaimFailure | None:
    try:
        status = rpc_status.from_call(error)  # type: ignore[arg-type]  # AioRpcError has the Call methods it reads
    except ValueError:
        return None  # a details trailer inconsistent with the status: ignore the details
    if status is None:
        return None
    for detail in status.details:
        if detail.Is(actuator_pb2.LaunchNodeClaimFailure.DESCRIPTOR):
            failure = actuator_pb2.LaunchNodeClaimFailure()
            detail.Unpack(failure)
            return failure
    return None


def _failed(attempt: actuator_pb2.LaunchAttempt) -> tuple[FailedOffering, ...]:
    return tuple(
        FailedOffering(
            instance_type=e.offering.instance_type,
            zone=e.offering.zone,
            capacity_type=e.offering.capacity_type,
            error_code=e.error_code,
            message=e.message,
        )
        for e in attempt.errors
    )


def _attempt_from_proto(attempt: actuator_pb2.LaunchAttempt) -> LaunchAttempt:
    return LaunchAttempt(
        started_at=_time(attempt, "start_time"),
        ended_at=_time(attempt, "end_time"),
        offerings=tuple((o.instance_type, o.zone, o.capacity_type) for o in attempt.offerings),
        failed_offerings=_failed(attempt),
    )


def _time(message: object, field: str) -> datetime | None:
    if not message.HasField(field):  # type: ignore[attr-defined]  # any message with the field
        return None
    stamp: Timestamp = getattr(message, field)
    return stamp.ToDatetime(tzinfo=UTC)


def _resources_from_proto(resources: actuator_pb2.Resources) -> Resources:
    return Resources.from_mapping(
        {
            "cpu": resources.cpu_millis,
            "memory": resources.memory_bytes,
            "pods": resources.pods,
            "ephemeral-storage": resources.ephemeral_storage_bytes,
            **{sys.intern(k): v for k, v in resources.extended_resources.items()},
        }
    )


def _instance_type_from_proto(instance_type: actuator_pb2.InstanceType) -> InstanceType:
    # Strings are interned: protobuf makes a new str for every field of every message, and a
    # catalog's ~1,300 types carry ~25,000 labels spelling a few dozen keys and a few hundred
    # values, and ~12,000 offerings naming a handful of zones and capacity types. Shared,
    # they cost ~5 MB less per catalog held (decision 0010).
    intern = sys.intern
    return InstanceType(
        name=intern(instance_type.name),
        capacity=_resources_from_proto(instance_type.capacity),
        allocatable=_resources_from_proto(instance_type.allocatable),
        labels={intern(k): intern(v) for k, v in instance_type.labels.items()},
        offerings=tuple(
            Offering(
                zone=intern(o.zone),
                capacity_type=intern(o.capacity_type),
                price_per_hour=o.price,
                available=o.available,
            )
            for o in instance_type.offerings
        ),
    )


def _instance_from_proto(nodeclaim: actuator_pb2.NodeClaim) -> CloudInstance:
    return CloudInstance(
        nodeclaim_name=nodeclaim.nodeclaim_name,
        nodepool_name=nodeclaim.nodepool_name,
        provider_id=nodeclaim.provider_id,
        instance_id=nodeclaim.instance_id,
        instance_type=nodeclaim.instance_type,
        zone=nodeclaim.zone,
        capacity_type=nodeclaim.capacity_type,
        state=nodeclaim.state,
        launch_time=_time(nodeclaim, "launch_time"),
        image_id=nodeclaim.image_id,
        tags=dict(nodeclaim.tags),
        subnet_id=nodeclaim.subnet_id,
        security_group_ids=tuple(sorted(nodeclaim.security_group_ids)),
    )


def _event_from_proto(event: actuator_pb2.WatchCloudEventsResponse) -> CloudEvent:
    offering = (
        (event.offering.instance_type, event.offering.zone, event.offering.capacity_type)
        if event.HasField("offering")
        else None
    )
    return CloudEvent(
        id=event.id,
        kind=_EVENT_KINDS.get(event.kind, CloudEventKind.UNSPECIFIED),
        instance_id=event.instance_id,
        provider_id=event.provider_id,
        nodeclaim_name=event.nodeclaim_name,
        instance_state=event.instance_state,
        time=_time(event, "time"),
        deadline=_time(event, "deadline"),
        offering=offering,
        ack_token=event.ack_token,
    )


def _reservation_from_proto(r: actuator_pb2.ResolvedCapacityReservation) -> CapacityReservation:
    return CapacityReservation(
        id=r.id,
        instance_type=r.instance_type,
        zone=r.zone,
        reservation_type=r.reservation_type or "default",
        available=r.available_instance_count,
        total=r.total_instance_count,
        owner_id=r.owner_id,
        instance_match_criteria=r.instance_match_criteria,
        end_time=_time(r, "end_time"),
        state=r.state or "active",
    )


def _taint_to_proto(taint: TaintSpec) -> actuator_pb2.Taint:
    return actuator_pb2.Taint(key=taint.key, value=taint.value, effect=str(taint.effect))


def _node_class_to_proto(spec: NodeClassSpec) -> actuator_pb2.NodeClass:
    options = spec.metadata_options
    return actuator_pb2.NodeClass(
        name=spec.name,
        subnet_selector_terms=[
            actuator_pb2.SubnetSelectorTerm(tags=dict(t.tags), id=t.id) for t in spec.subnet_terms
        ],
        security_group_selector_terms=[
            actuator_pb2.SecurityGroupSelectorTerm(tags=dict(t.tags), id=t.id, name=t.name)
            for t in spec.security_group_terms
        ],
        ami_selector_terms=[
            actuator_pb2.AmiSelectorTerm(
                id=t.id, name=t.name, alias=t.alias, tags=dict(t.tags), owner=t.owner
            )
            for t in spec.ami_terms
        ],
        tags=dict(spec.tags),
        user_data=spec.user_data,
        role=spec.role,
        instance_profile=spec.instance_profile,
        block_device_mappings=[
            actuator_pb2.BlockDeviceMapping(
                device_name=m.device_name,
                root_volume=m.root_volume,
                volume_size_bytes=m.volume_size_bytes,
                volume_type=m.volume_type,
                iops=m.iops,
                throughput_mibps=m.throughput_mibps,
                encrypted=m.encrypted,
                kms_key_id=m.kms_key_id,
                delete_on_termination=m.delete_on_termination,
                snapshot_id=m.snapshot_id,
            )
            for m in spec.block_device_mappings
        ],
        metadata_options=actuator_pb2.MetadataOptions(
            http_endpoint=options.http_endpoint,
            http_protocol_ipv6=options.http_protocol_ipv6,
            http_put_response_hop_limit=options.http_put_response_hop_limit,
            http_tokens=options.http_tokens,
        ),
        ami_family=spec.ami_family,
        associate_public_ip_address=spec.associate_public_ip_address,
        capacity_reservation_selector_terms=[
            actuator_pb2.CapacityReservationSelectorTerm(
                id=t.id, tags=dict(t.tags), owner_id=t.owner_id
            )
            for t in spec.capacity_reservation_terms
        ],
        spot_allocation_strategy=spec.spot_allocation_strategy,
        on_demand_allocation_strategy=spec.on_demand_allocation_strategy,
    )


def _kubelet_to_proto(spec: KubeletSpec | None) -> actuator_pb2.KubeletConfiguration | None:
    if spec is None:
        return None
    configuration = actuator_pb2.KubeletConfiguration(
        system_reserved=dict(spec.system_reserved),
        kube_reserved=dict(spec.kube_reserved),
        eviction_hard=dict(spec.eviction_hard),
        cluster_dns=list(spec.cluster_dns),
    )
    if spec.max_pods is not None:
        configuration.max_pods = spec.max_pods
    if spec.pods_per_core is not None:
        configuration.pods_per_core = spec.pods_per_core
    return configuration
