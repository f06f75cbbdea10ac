"""Server interceptors: bearer-token authentication, and one log line + metric per call."""

from __future__ import annotations

import hmac
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

import grpc
import structlog

from actuator_svc.metrics import ActuatorMetrics
from actuator_svc.rpc.credentials import BearerToken

log = structlog.get_logger("actuator_svc.rpc")
# Health checks answer without a token: kubelet gRPC probes cannot send one. Reflection needs
# the token like the API (grpcurl sends its -H headers with reflection requests too).
OPEN_SERVICES = ("/grpc.health.v1.Health/",)
# Calls not logged or timed per call: probes every few seconds, and grpcurl's discovery.
QUIET_SERVICES = ("/grpc.health.v1.Health/", "/grpc.reflection.")

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
        request_deserializer=handler.request_deserializer,
        response_serializer=handler.response_serializer,
    )
    return deny


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
