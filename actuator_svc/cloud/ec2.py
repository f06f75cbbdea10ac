"""The CloudProvider on AWS (or an emulator) through aiobotocore.

Ec2Cloud owns the clients and their lifetime; the calls live by concept in aws_calls (retry and
error mapping), ec2_catalog, ec2_node_class, ec2_launch and sqs_queue. Capacity errors of
CreateFleet come back as FleetErrors, not exceptions.
"""

from __future__ import annotations

from contextlib import AsyncExitStack
from types import TracebackType
from typing import Self

from aiobotocore.config import AioConfig
from aiobotocore.session import get_session

from actuator_svc.cloud.aws_calls import AwsEndpoints, RetryPolicy
from actuator_svc.cloud.ec2_catalog import Ec2CatalogCalls
from actuator_svc.cloud.ec2_launch import Ec2LaunchCalls
from actuator_svc.cloud.ec2_node_class import Ec2NodeClassCalls
from actuator_svc.cloud.sqs_queue import SqsQueueCalls

__all__ = [
    "DESCRIBE_MAX_RESULTS",
    "DESCRIBE_MIN_RESULTS",
    "AwsEndpoints",
    "Ec2Cloud",
    "RetryPolicy",
]

# EC2's bounds on DescribeInstances' MaxResults.
DESCRIBE_MIN_RESULTS = 5
DESCRIBE_MAX_RESULTS = 1000


class Ec2Cloud(Ec2CatalogCalls, Ec2NodeClassCalls, Ec2LaunchCalls, SqsQueueCalls):
    """CloudProvider over aiobotocore. Use as `async with Ec2Cloud(...) as cloud:`."""

    def __init__(
        self,
        *,
        region: str,
        endpoints: AwsEndpoints | None = None,
        retry: RetryPolicy | None = None,
        use_pricing_api: bool | None = None,
        timeout_seconds: float = 30.0,
        describe_page_size: int = DESCRIBE_MAX_RESULTS,
    ) -> None:
        """`describe_page_size`: MaxResults of each DescribeInstances page (EC2 allows 5-1000;
        a smaller page bounds each answer's size and time, at more calls)."""
        if not DESCRIBE_MIN_RESULTS <= describe_page_size <= DESCRIBE_MAX_RESULTS:
            raise ValueError(
                f"describe_page_size must be between {DESCRIBE_MIN_RESULTS} and "
                f"{DESCRIBE_MAX_RESULTS} (EC2's MaxResults), got {describe_page_size}"
            )
        self.describe_page_size = describe_page_size
        self.region = region
        self.endpoints = endpoints or AwsEndpoints()
        self.retry = retry or RetryPolicy()
        # Against an emulated EC2 without a pricing endpoint there is no Pricing API to ask.
        self.use_pricing_api = (
            use_pricing_api
            if use_pricing_api is not None
            else self.endpoints.pricing is not None or self.endpoints.ec2 is None
        )
        self._config = AioConfig(
            retries={"total_max_attempts": 1},
            connect_timeout=timeout_seconds,
            read_timeout=timeout_seconds,
            max_pool_connections=64,
        )
        self._stack = AsyncExitStack()
        self._ec2 = None
        self._sqs = None
        self._pricing = None
        self._templates = {}  # see Ec2LaunchCalls

    async def __aenter__(self) -> Self:
        session = get_session()
        self._ec2 = await self._stack.enter_async_context(
            session.create_client(
                "ec2", region_name=self.region, endpoint_url=self.endpoints.ec2, config=self._config
            )
        )
        self._sqs = await self._stack.enter_async_context(
            session.create_client(
                "sqs",
                region_name=self.region,
                endpoint_url=self.endpoints.sqs or self.endpoints.ec2,
                config=self._config,
            )
        )
        if self.use_pricing_api:
            self._pricing = await self._stack.enter_async_context(
                session.create_client(
                    "pricing",
                    region_name="us-east-1",  # the Pricing API answers in us-east-1
                    endpoint_url=self.endpoints.pricing,
                    config=self._config,
                )
            )
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._stack.aclose()
