"""Server interceptors: bearer-token authentication, and one log line + metric per call."""

from __future__ import annotations

import hmac
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

import grpc
import structlog

from actuator_svc.metrics import ActuatorMetrics

log = structlog.get_logger("actuator_svc.rpc")
# Health checks and reflection answer without a token: probes and grpcurl need them first.
OPEN_SERVICES = ("/grpc.health.v1.Health/", "/grpc.reflection.")

if TYPE_CHECKING:  # the grpc stubs are generic; the runtime classes are not
    Handler = grpc.RpcMethodHandler[Any, Any]
else:
    Handler = grpc.RpcMethodHandler
Continuation = Callable[[grpc.HandlerCallDetails], Awaitable[Handler | None]]


async def _unauthenticated(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
    await context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong bearer token")


class BearerTokenInterceptor(grpc.aio.ServerInterceptor):
    """Rejects calls whose `authorization` metadata is not `Bearer <token>`."""

    def __init__(self, token: str) -> None:
        self._expected = f"Bearer {token}".encode()
        self._deny: Handler = grpc.unary_unary_rpc_method_handler(_unauthenticated)

    async def intercept_service(
        self, continuation: Continuation, handler_call_details: grpc.HandlerCallDetails
    ) -> Handler | None:
        if handler_call_details.method.startswith(OPEN_SERVICES):
            return await continuation(handler_call_details)
        metadata = dict(handler_call_details.invocation_metadata or ())
        given = metadata.get("authorization", "")
        given_bytes = given.encode() if isinstance(given, str) else bytes(given)
        if not hmac.compare_digest(given_bytes, self._expected):
            log.warning("rpc_unauthenticated", method=handler_call_details.method)
            return self._deny
        return await continuation(handler_call_details)


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
        if handler is None or method.startswith(OPEN_SERVICES):
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
