"""One AWS API call with daiku's retry policy, and the error mapping every Ec2Cloud part shares.

botocore's own retries are switched off: throttling (RequestLimitExceeded), 5xx and connection
errors are retried here with jittered exponential backoff (tenacity), bounded in attempts, and
then raised as CloudUnavailableError. Every other client error is permanent and raised at once as
CloudPermanentError.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import structlog
from botocore.exceptions import BotoCoreError, ClientError
from tenacity import (
    AsyncRetrying,
    RetryError,
    retry_if_exception,
    stop_after_attempt,
    wait_random_exponential,
)

from actuator_svc.core.fleet_errors import is_retryable
from actuator_svc.errors import CloudPermanentError, CloudUnavailableError

log = structlog.get_logger("actuator_svc.cloud.ec2")


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded, jittered exponential backoff for throttling and server errors."""

    max_attempts: int = 6
    base_seconds: float = 0.1
    max_seconds: float = 5.0


@dataclass(frozen=True)
class AwsEndpoints:
    """Endpoint overrides (emulators); None means AWS's own endpoint for the region."""

    ec2: str | None = None
    sqs: str | None = None
    pricing: str | None = None


def _error_code(exc: BaseException) -> tuple[str, int]:
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
        return str(error.get("Code", "Unknown")), int(status or 0)
    return type(exc).__name__, 0


def _is_transient(exc: BaseException) -> bool:
    if isinstance(exc, ClientError):
        code, status = _error_code(exc)
        return is_retryable(code, status)
    return isinstance(exc, BotoCoreError)  # connection refused / reset / timeouts


def tag_filters(tags: Mapping[str, str]) -> list[dict[str, Any]]:
    """EC2 filters matching all tags; the value "*" matches any value of the key."""
    return [
        {"Name": "tag-key", "Values": [k]} if v == "*" else {"Name": f"tag:{k}", "Values": [v]}
        for k, v in tags.items()
    ]


def tags_dict(tags: Sequence[Mapping[str, str]] | None) -> dict[str, str]:
    return {t["Key"]: t.get("Value", "") for t in tags or []}


def tag_list(tags: Mapping[str, str]) -> list[dict[str, str]]:
    return [{"Key": k, "Value": v} for k, v in sorted(tags.items())]


class AwsCalls:
    """The clients and the retry policy; each concept's calls (catalog, node class, launch,
    queue) are a subclass, and Ec2Cloud joins them."""

    region: str
    retry: RetryPolicy
    _ec2: Any
    _sqs: Any
    _pricing: Any

    async def _call(
        self, operation: str, method: Callable[..., Awaitable[Any]], **kwargs: Any
    ) -> Any:
        """Run one API call with the retry policy; map errors to the actuator's exceptions."""
        retrying = AsyncRetrying(
            retry=retry_if_exception(_is_transient),
            wait=wait_random_exponential(
                multiplier=self.retry.base_seconds, max=self.retry.max_seconds
            ),
            stop=stop_after_attempt(self.retry.max_attempts),
            before_sleep=lambda state: log.warning(
                "cloud_call_retrying",
                operation=operation,
                attempt=state.attempt_number,
                error=_error_code(state.outcome.exception())[0]  # type: ignore[arg-type]
                if state.outcome
                else "",
            ),
            reraise=False,
        )
        try:
            async for attempt in retrying:
                with attempt:
                    return await method(**kwargs)
        except RetryError as exc:
            last = exc.last_attempt.exception()
            code, _ = _error_code(last) if last else ("Unknown", 0)
            raise CloudUnavailableError(
                operation, code, f"still failing after {self.retry.max_attempts} attempts: {last}"
            ) from last
        except ClientError as exc:
            code, _ = _error_code(exc)
            message = exc.response.get("Error", {}).get("Message", str(exc))
            raise CloudPermanentError(operation, code, str(message)) from exc
        raise AssertionError("unreachable: tenacity either returns or raises")
