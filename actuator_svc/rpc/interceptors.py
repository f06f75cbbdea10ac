"""Server interceptors: bearer-token authentication (on metadata, before any body is parsed),
request guarding (a size limit per method, corrupt bodies and unexpected errors as clear status
codes, never UNKNOWN with an exception name), and one log line + metric per call."""

from __future__ import annotations

import hmac
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

import grpc
import structlog
from google.protobuf.message import DecodeError

from actuator_svc.metrics import ActuatorMetrics
from actuator_svc.rpc.credentials import BearerToken

log = structlog.get_logger("actuator_svc.rpc")
# Health checks answer without a token: kubelet gRPC probes cannot send one. Reflection needs
# the token like the API (grpcurl sends its -H headers with reflection requests too).
OPEN_SERVICES = ("/grpc.health.v1.Health/",)
# Calls not logged or timed per call: probes every few seconds, and grpcurl's discovery.
QUIET_SERVICES = ("/grpc.health.v1.Health/", "/grpc.reflection.")

KIB = 1024
MIB = 1024 * KIB
ACTUATOR = "/daiku.actuator.v1.Actuator/"
# The largest request body each method takes. The biggest valid LaunchNodeClaim (every list at
# its limit) is a few hundred KiB; a call naming a claim is a few hundred bytes. Bigger bodies
# are refused before they are parsed, so a flood of them costs their bytes, not their objects.
MAX_REQUEST_BYTES: dict[str, int] = {
    f"{ACTUATOR}LaunchNodeClaim": 256 * KIB,
    f"{ACTUATOR}ResolveNodeClass": 256 * KIB,
    f"{ACTUATOR}AcknowledgeCloudEvents": 256 * KIB,
    f"{ACTUATOR}ListInstanceTypes": 64 * KIB,
    f"{ACTUATOR}GetNodeClaim": 4 * KIB,
    f"{ACTUATOR}TerminateNodeClaim": 4 * KIB,
    f"{ACTUATOR}ListNodeClaims": 4 * KIB,
    f"{ACTUATOR}WatchCloudEvents": 4 * KIB,
}
# Every other method (health, reflection); also the server-wide receive limit is the largest.
DEFAULT_MAX_REQUEST_BYTES = 64 * KIB
MAX_RECEIVE_MESSAGE_BYTES = max(DEFAULT_MAX_REQUEST_BYTES, *MAX_REQUEST_BYTES.values())

if TYPE_CHECKING:  # the grpc stubs are generic; the runtime classes are not
    Handler = grpc.RpcMethodHandler[Any, Any]
else:
    Handler = grpc.RpcMethodHandler
Continuation = Callable[[grpc.HandlerCallDetails], Awaitable[Handler | None]]


def _deny(method: str, handler: Handler, reason: str) -> Handler:
    """A handler of the same kind as `handler` that logs the refusal (method, peer, reason;
    never the token) and aborts before reading the request."""

    async def unauthenticated(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        log.warning("rpc_unauthenticated", method=method, peer=context.peer(), reason=reason)
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong bearer token")

    # The call's shape must match the method's, or a streaming client waits on a unary answer.
    make = {
        (False, False): grpc.unary_unary_rpc_method_handler,
        (False, True): grpc.unary_stream_rpc_method_handler,
        (True, False): grpc.stream_unary_rpc_method_handler,
        (True, True): grpc.stream_stream_rpc_method_handler,
    }[(bool(handler.request_streaming), bool(handler.response_streaming))]
    deny: Handler = make(
        unauthenticated,
        request_deserializer=_discard,  # an unauthenticated body is never parsed
        response_serializer=handler.response_serializer,
    )
    return deny


def _discard(_body: bytes) -> None:
    return None


def _same_kind(handler: Handler, behaviour: Any, deserializer: Callable[[bytes], Any]) -> Handler:
    """`handler` with another behaviour and request deserializer (unary or server-streaming)."""
    if handler.unary_unary is not None:
        made: Handler = grpc.unary_unary_rpc_method_handler(
            behaviour,
            request_deserializer=deserializer,
            response_serializer=handler.response_serializer,
        )
    else:
        made = grpc.unary_stream_rpc_method_handler(
            behaviour,
            request_deserializer=deserializer,
            response_serializer=handler.response_serializer,
        )
    return made


class _Refused:
    """A request body refused while deserializing; the behaviour aborts with it."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        self.code = code
        self.message = message


class RequestGuardInterceptor(grpc.aio.ServerInterceptor):
    """Per-method body limits (RESOURCE_EXHAUSTED before parsing), corrupt bodies
    (INVALID_ARGUMENT) and unexpected errors (INTERNAL, logged with the exception type; the
    caller sees no Python names). grpc itself would answer both with UNKNOWN and the name."""

    async def intercept_service(
        self, continuation: Continuation, handler_call_details: grpc.HandlerCallDetails
    ) -> Handler | None:
        handler = await continuation(handler_call_details)
        method = handler_call_details.method
        if handler is None or (handler.unary_unary is None and handler.unary_stream is None):
            return handler
        limit = MAX_REQUEST_BYTES.get(method, DEFAULT_MAX_REQUEST_BYTES)
        parse = handler.request_deserializer
        name = method.rsplit("/", 1)[-1]

        def deserialize(body: bytes) -> Any:
            if len(body) > limit:
                return _Refused(
                    grpc.StatusCode.RESOURCE_EXHAUSTED,
                    f"the request is {len(body)} bytes; {name} takes at most {limit}",
                )
            try:
                return parse(body) if parse is not None else body
            except DecodeError:
                return _Refused(
                    grpc.StatusCode.INVALID_ARGUMENT, f"the request is not a valid {name} message"
                )

        if handler.unary_unary is not None:
            unary: Any = handler.unary_unary

            async def guarded(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
                if isinstance(request, _Refused):
                    await context.abort(request.code, request.message)
                try:
                    return await unary(request, context)
                except Exception as exc:  # everything unexpected, reported once
                    await _internal(method, context, exc)

            return _same_kind(handler, guarded, deserialize)
        streaming: Any = handler.unary_stream

        async def guarded_stream(
            request: Any, context: grpc.aio.ServicerContext[Any, Any]
        ) -> AsyncIterator[Any]:
            if isinstance(request, _Refused):
                await context.abort(request.code, request.message)
            try:
                async for item in streaming(request, context):
                    yield item
            except Exception as exc:  # everything unexpected, reported once
                await _internal(method, context, exc)

        return _same_kind(handler, guarded_stream, deserialize)


async def _internal(
    method: str, context: grpc.aio.ServicerContext[Any, Any], exc: Exception
) -> None:
    """Re-raise an abort the behaviour chose; anything else is logged (type and traceback,
    server side only) and answered INTERNAL without Python names."""
    if isinstance(exc, grpc.aio.AbortError):
        raise exc
    log.error("rpc_internal_error", method=method, error_type=type(exc).__name__, exc_info=exc)
    await context.abort(grpc.StatusCode.INTERNAL, "internal error; the actuator logged it")


class BearerTokenInterceptor(grpc.aio.ServerInterceptor):
    """Rejects calls whose `authorization` metadata is not `Bearer <token>`."""

    def __init__(self, token: BearerToken) -> None:
        self._token = token

    async def intercept_service(
        self, continuation: Continuation, handler_call_details: grpc.HandlerCallDetails
    ) -> Handler | None:
        method = handler_call_details.method
        if method.startswith(OPEN_SERVICES):
            return await continuation(handler_call_details)
        handler = await continuation(handler_call_details)
        if handler is None:  # unknown method: grpc answers UNIMPLEMENTED
            return None
        given = dict(handler_call_details.invocation_metadata or ()).get("authorization")
        if given is None:
            return _deny(method, handler, "no authorization metadata")
        given_bytes = given.encode() if isinstance(given, str) else bytes(given)
        expected = f"Bearer {self._token.current()}".encode()
        # Constant time: the comparison must not tell a caller how much of the token it got.
        if not hmac.compare_digest(given_bytes, expected):
            return _deny(method, handler, "wrong bearer token")
        return handler


class ObservabilityInterceptor(grpc.aio.ServerInterceptor):
    """Logs `rpc_finished` (method, code, duration) and records the latency histogram."""

    def __init__(self, metrics: ActuatorMetrics) -> None:
        self._metrics = metrics

    def _record(self, method: str, context: Any, started: float, failed: bool) -> None:
        code = context.code() or (grpc.StatusCode.UNKNOWN if failed else grpc.StatusCode.OK)
        name = code.name if isinstance(code, grpc.StatusCode) else str(code)
        seconds = time.monotonic() - started
        self._metrics.rpc_seconds.labels(method=method, code=name).observe(seconds)
        log.info("rpc_finished", method=method, code=name, duration_ms=round(seconds * 1000, 3))

    async def intercept_service(
        self, continuation: Continuation, handler_call_details: grpc.HandlerCallDetails
    ) -> Handler | None:
        handler = await continuation(handler_call_details)
        method = handler_call_details.method
        if handler is None or method.startswith(QUIET_SERVICES):
            return handler
        if handler.unary_unary is not None:
            inner = handler.unary_unary

            async def unary(request: Any, context: Any) -> Any:
                started, failed = time.monotonic(), True
                try:
                    response = await inner(request, context)
                    failed = False
                    return response
                finally:
                    self._record(method, context, started, failed)

            return grpc.unary_unary_rpc_method_handler(
                unary,
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.unary_stream is not None:
            stream: Any = handler.unary_stream

            async def streaming(request: Any, context: Any) -> AsyncIterator[Any]:
                started, failed = time.monotonic(), True
                try:
                    async for item in stream(request, context):
                        yield item
                    failed = False
                finally:
                    self._record(method, context, started, failed)

            return grpc.unary_stream_rpc_method_handler(
                streaming,
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        return handler
