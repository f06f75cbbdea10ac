"""The Actuator gRPC service: requests in, core calls, responses out; errors -> status codes."""

# ruff: noqa: N802  (method names are the RPC names the generated base class declares)

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, NoReturn

import grpc
from google.rpc import code_pb2, status_pb2  # type: ignore[import-untyped]
from grpc_status import rpc_status

from actuator_svc.catalog import Catalog
from actuator_svc.core.cloud_events import AckToken, CloudEventError
from actuator_svc.errors import (
    ActuatorError,
    CloudPermanentError,
    CloudUnavailableError,
    InvalidRequestError,
    NodeClaimNotFoundError,
    NothingSelectedError,
    OfferingsExhaustedError,
)
from actuator_svc.interruption import InterruptionFeed
from actuator_svc.launcher import Launcher
from actuator_svc.node_class_resolver import NodeClassResolver
from actuator_svc.nodeclaims import NodeClaims
from actuator_svc.rpc import convert
from daiku.actuator.v1 import actuator_pb2 as pb
from daiku.actuator.v1 import actuator_pb2_grpc

if TYPE_CHECKING:  # the grpc stubs are generic; the runtime classes are not
    Context = grpc.aio.ServicerContext[Any, Any]
else:
    Context = grpc.aio.ServicerContext

MAX_ACK_TOKENS = 100

_STATUS = {
    InvalidRequestError: grpc.StatusCode.INVALID_ARGUMENT,
    NodeClaimNotFoundError: grpc.StatusCode.NOT_FOUND,
    CloudUnavailableError: grpc.StatusCode.UNAVAILABLE,
    CloudPermanentError: grpc.StatusCode.FAILED_PRECONDITION,
}


async def abort_with(context: Context, exc: ActuatorError) -> NoReturn:
    """End the call with the status code of `exc`; RESOURCE_EXHAUSTED carries the attempts."""
    if isinstance(exc, OfferingsExhaustedError):
        failure = pb.LaunchNodeClaimFailure(
            nodeclaim_name=exc.nodeclaim_name,
            attempts=[convert.attempt_to_proto(a) for a in exc.attempts],
        )
        # Offerings skipped without a call (cached ICE, no subnet in the zone) are reported as
        # a pseudo-attempt with no times, so the caller sees a reason for every offering.
        if exc.skipped:
            failure.attempts.append(
                pb.LaunchAttempt(
                    offerings=[convert.key_to_proto(s.offering) for s in exc.skipped],
                    errors=[
                        pb.OfferingError(
                            offering=convert.key_to_proto(s.offering),
                            error_code=s.reason,
                            message="not tried: " + s.reason,
                        )
                        for s in exc.skipped
                    ],
                )
            )
        detail = status_pb2.Status()
        detail.code = code_pb2.RESOURCE_EXHAUSTED
        detail.message = str(exc)
        detail.details.add().Pack(failure)
        await context.abort_with_status(rpc_status.to_status(detail))
    for kind, code in _STATUS.items():
        if isinstance(exc, kind):
            await context.abort(code, str(exc))
    await context.abort(grpc.StatusCode.INTERNAL, str(exc))


class ActuatorServicer(actuator_pb2_grpc.ActuatorServicer):
    """daiku.actuator.v1.Actuator."""

    def __init__(
        self,
        *,
        catalog: Catalog,
        launcher: Launcher,
        nodeclaims: NodeClaims,
        interruptions: InterruptionFeed | None,
        resolver: NodeClassResolver,
    ) -> None:
        self._catalog = catalog
        self._launcher = launcher
        self._resolver = resolver
        self._nodeclaims = nodeclaims
        self._interruptions = interruptions

    async def ListInstanceTypes(
        self, request: pb.ListInstanceTypesRequest, context: Context
    ) -> pb.ListInstanceTypesResponse:
        try:
            if request.root_volume_size_bytes < 0:
                raise InvalidRequestError("root_volume_size_bytes", "must not be negative")
            kubelet = convert.kubelet_from_proto(request.kubelet, "kubelet")
            types = await self._catalog.instance_types(kubelet, request.root_volume_size_bytes)
        except ActuatorError as exc:
            await abort_with(context, exc)
        return pb.ListInstanceTypesResponse(
            instance_types=[convert.instance_type_to_proto(t) for t in types]
        )

    async def LaunchNodeClaim(
        self, request: pb.LaunchNodeClaimRequest, context: Context
    ) -> pb.LaunchNodeClaimResponse:
        try:
            result = await self._launcher.launch(convert.launch_request_from_proto(request))
        except ActuatorError as exc:
            await abort_with(context, exc)
        return convert.launch_result_to_proto(result)

    async def TerminateNodeClaim(
        self, request: pb.TerminateNodeClaimRequest, context: Context
    ) -> pb.TerminateNodeClaimResponse:
        try:
            name = convert.require_name(request.nodeclaim_name, "nodeclaim_name")
            done = await self._nodeclaims.terminate(name)
        except ActuatorError as exc:
            await abort_with(context, exc)
        return pb.TerminateNodeClaimResponse(instance_id=done.instance_id, state=done.state)

    async def GetNodeClaim(
        self, request: pb.GetNodeClaimRequest, context: Context
    ) -> pb.GetNodeClaimResponse:
        try:
            name = convert.require_name(request.nodeclaim_name, "nodeclaim_name")
            instance = await self._nodeclaims.get(name)
        except ActuatorError as exc:
            await abort_with(context, exc)
        return pb.GetNodeClaimResponse(nodeclaim=convert.nodeclaim_to_proto(instance))

    async def ListNodeClaims(
        self, request: pb.ListNodeClaimsRequest, context: Context
    ) -> pb.ListNodeClaimsResponse:
        try:
            # A filter is a NodePool name: "*" or a megabyte must not become an EC2 filter.
            pool = (
                convert.require_name(request.nodepool_name, "nodepool_name")
                if request.nodepool_name
                else ""
            )
            instances = await self._nodeclaims.list(pool)
        except ActuatorError as exc:
            await abort_with(context, exc)
        return pb.ListNodeClaimsResponse(
            nodeclaims=[convert.nodeclaim_to_proto(i) for i in instances]
        )

    async def ResolveNodeClass(
        self, request: pb.ResolveNodeClassRequest, context: Context
    ) -> pb.ResolveNodeClassResponse:
        try:
            node_class = convert.node_class_from_proto(request.node_class)
            resolution = await self._resolver.describe(node_class, fresh=True)
        except NothingSelectedError as exc:
            # Well formed, but the cloud holds nothing it names: a precondition, not an argument.
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, str(exc))
        except ActuatorError as exc:
            await abort_with(context, exc)
        return convert.resolution_to_proto(resolution)

    async def WatchCloudEvents(
        self, request: pb.WatchCloudEventsRequest, context: Context
    ) -> AsyncIterator[pb.WatchCloudEventsResponse]:
        if self._interruptions is None:
            await context.abort(
                grpc.StatusCode.FAILED_PRECONDITION,
                "no interruption queue is configured (--interruption-queue)",
            )
        async with self._interruptions.subscribe(acknowledge=request.acknowledge) as subscription:
            while True:
                yield convert.event_to_proto(await subscription.events.get())

    async def AcknowledgeCloudEvents(
        self, request: pb.AcknowledgeCloudEventsRequest, context: Context
    ) -> pb.AcknowledgeCloudEventsResponse:
        if self._interruptions is None:
            await context.abort(
                grpc.StatusCode.FAILED_PRECONDITION,
                "no interruption queue is configured (--interruption-queue)",
            )
        if len(request.ack_tokens) > MAX_ACK_TOKENS:
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"ack_tokens: at most {MAX_ACK_TOKENS} per call, got {len(request.ack_tokens)}",
            )
        tokens = []
        for index, text in enumerate(request.ack_tokens):
            try:
                tokens.append(AckToken.decode(text))
            except CloudEventError as exc:
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"ack_tokens[{index}]: {exc}")
        await self._interruptions.acknowledge(tokens)
        return pb.AcknowledgeCloudEventsResponse()
