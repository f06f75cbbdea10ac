"""The CloudProvider on AWS (or an emulator) through aiobotocore.

botocore's own retries are switched off: throttling (RequestLimitExceeded), 5xx and connection
errors are retried here with jittered exponential backoff (tenacity), bounded in attempts, and
then raised as CloudUnavailableError. Every other client error is permanent and raised at once as
CloudPermanentError, except capacity errors of CreateFleet, which come back as FleetErrors.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, Self, TypeVar

import structlog
from aiobotocore.config import AioConfig
from aiobotocore.session import get_session
from botocore.exceptions import BotoCoreError, ClientError
from tenacity import (
    AsyncRetrying,
    RetryError,
    retry_if_exception,
    stop_after_attempt,
    wait_random_exponential,
)

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
from actuator_svc.core.fleet_errors import is_retryable, is_unavailable_offering
from actuator_svc.core.launch_template import BlockDevice, LaunchTemplateConfig
from actuator_svc.core.node_class import (
    CapacityReservationTerm,
    ImageTerm,
    SecurityGroupTerm,
    SubnetTerm,
)
from actuator_svc.errors import CloudPermanentError, CloudUnavailableError

log = structlog.get_logger("actuator_svc.cloud.ec2")
T = TypeVar("T")
_ALIVE_STATES = ["pending", "running", "stopping", "stopped", "shutting-down"]
# EC2 takes at most 200 values in one filter.
_MAX_FILTER_VALUES = 200
# EC2's bounds on DescribeInstances' MaxResults.
DESCRIBE_MIN_RESULTS = 5
DESCRIBE_MAX_RESULTS = 1000
_ALIAS_FAMILIES = {"al2023": "amazon-eks-node-al2023-{arch}-standard-{version}"}


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


def _tag_filters(tags: Mapping[str, str]) -> list[dict[str, Any]]:
    """EC2 filters matching all tags; the value "*" matches any value of the key."""
    return [
        {"Name": "tag-key", "Values": [k]} if v == "*" else {"Name": f"tag:{k}", "Values": [v]}
        for k, v in tags.items()
    ]


def _tags_dict(tags: Sequence[Mapping[str, str]] | None) -> dict[str, str]:
    return {t["Key"]: t.get("Value", "") for t in tags or []}


def _tag_list(tags: Mapping[str, str]) -> list[dict[str, str]]:
    return [{"Key": k, "Value": v} for k, v in sorted(tags.items())]


class Ec2Cloud:
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
        self._ec2: Any = None
        self._sqs: Any = None
        self._pricing: Any = None
        # Launch templates this process ensured, by name: re-created if deleted under it.
        self._templates: dict[str, LaunchTemplateConfig] = {}

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

    # Catalog ------------------------------------------------------------------------------

    async def describe_instance_types(self) -> dict[str, dict[str, Any]]:
        """Every instance type of the region, keyed by name."""
        result: dict[str, dict[str, Any]] = {}
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {"MaxResults": 100}
            if token:
                kwargs["NextToken"] = token
            page = await self._call(
                "DescribeInstanceTypes", self._ec2.describe_instance_types, **kwargs
            )
            for item in page.get("InstanceTypes", []):
                result[item["InstanceType"]] = item
            token = page.get("NextToken")
            if not token:
                return result

    async def instance_type_zones(self) -> dict[str, list[str]]:
        """The zones each type is offered in."""
        zones: dict[str, list[str]] = {}
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {"LocationType": "availability-zone", "MaxResults": 1000}
            if token:
                kwargs["NextToken"] = token
            page = await self._call(
                "DescribeInstanceTypeOfferings",
                self._ec2.describe_instance_type_offerings,
                **kwargs,
            )
            for item in page.get("InstanceTypeOfferings", []):
                zones.setdefault(item["InstanceType"], []).append(item["Location"])
            token = page.get("NextToken")
            if not token:
                return zones

    async def on_demand_prices(self) -> dict[str, float]:
        """Linux on-demand prices from the Pricing API; CloudUnavailableError when not reachable."""
        if self._pricing is None:
            raise CloudUnavailableError("GetProducts", "NoPricingApi", "no Pricing API configured")
        prices: dict[str, float] = {}
        filters = [
            {"Type": "TERM_MATCH", "Field": k, "Value": v}
            for k, v in {
                "regionCode": self.region,
                "operatingSystem": "Linux",
                "tenancy": "Shared",
                "preInstalledSw": "NA",
                "capacitystatus": "Used",
                "licenseModel": "No License required",
            }.items()
        ]
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {"ServiceCode": "AmazonEC2", "Filters": filters}
            if token:
                kwargs["NextToken"] = token
            page = await self._call("GetProducts", self._pricing.get_products, **kwargs)
            for text in page.get("PriceList", []):
                product = json.loads(text)
                name = product.get("product", {}).get("attributes", {}).get("instanceType")
                for term in product.get("terms", {}).get("OnDemand", {}).values():
                    for dimension in term.get("priceDimensions", {}).values():
                        usd = float(dimension.get("pricePerUnit", {}).get("USD", 0) or 0)
                        if name and usd > 0:
                            prices[name] = usd
            token = page.get("NextToken")
            if not token:
                return prices

    async def spot_prices(self) -> dict[tuple[str, str], float]:
        """The latest Linux spot price per (type, zone)."""
        latest: dict[tuple[str, str], tuple[datetime, float]] = {}
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {
                "ProductDescriptions": ["Linux/UNIX", "Linux/UNIX (Amazon VPC)"],
                "StartTime": datetime.now(tz=UTC),
                "MaxResults": 1000,
            }
            if token:
                kwargs["NextToken"] = token
            page = await self._call(
                "DescribeSpotPriceHistory",
                self._ec2.describe_spot_price_history,
                **kwargs,
            )
            for item in page.get("SpotPriceHistory", []):
                key = (item["InstanceType"], item["AvailabilityZone"])
                stamp = item.get("Timestamp") or datetime.min.replace(tzinfo=UTC)
                if key not in latest or stamp >= latest[key][0]:
                    latest[key] = (stamp, float(item["SpotPrice"]))
            token = page.get("NextToken")
            if not token:
                return {k: price for k, (_, price) in latest.items()}

    # Node class resolution ----------------------------------------------------------------

    async def find_subnets(self, terms: Sequence[SubnetTerm]) -> list[Subnet]:
        """Subnets matching any term."""
        found: dict[str, Subnet] = {}
        for term in terms:
            kwargs: dict[str, Any] = (
                {"SubnetIds": [term.id]} if term.id else {"Filters": _tag_filters(term.tags)}
            )
            page = await self._call("DescribeSubnets", self._ec2.describe_subnets, **kwargs)
            for s in page.get("Subnets", []):
                found[s["SubnetId"]] = Subnet(
                    id=s["SubnetId"],
                    zone=s["AvailabilityZone"],
                    available_ip_count=int(s.get("AvailableIpAddressCount", 0)),
                    zone_id=str(s.get("AvailabilityZoneId", "")),
                )
        return sorted(found.values(), key=lambda s: s.id)

    async def find_security_groups(self, terms: Sequence[SecurityGroupTerm]) -> list[SecurityGroup]:
        """Security groups matching any term, by id."""
        found: dict[str, SecurityGroup] = {}
        for term in terms:
            kwargs: dict[str, Any]
            if term.id:
                kwargs = {"GroupIds": [term.id]}
            elif term.name:
                kwargs = {"Filters": [{"Name": "group-name", "Values": [term.name]}]}
            else:
                kwargs = {"Filters": _tag_filters(term.tags)}
            page = await self._call(
                "DescribeSecurityGroups",
                self._ec2.describe_security_groups,
                **kwargs,
            )
            for g in page.get("SecurityGroups", []):
                found[g["GroupId"]] = SecurityGroup(g["GroupId"], str(g.get("GroupName", "")))
        return [found[i] for i in sorted(found)]

    async def find_images(self, terms: Sequence[ImageTerm]) -> list[Image]:
        """Available images matching any term."""
        found: dict[str, Image] = {}
        for term in terms:
            kwargs: dict[str, Any] = {"Filters": [{"Name": "state", "Values": ["available"]}]}
            if term.id:
                kwargs["ImageIds"] = [term.id]
            if term.name:
                kwargs["Filters"].append({"Name": "name", "Values": [term.name]})
            if term.alias:
                family, _, version = term.alias.partition("@")
                pattern = _ALIAS_FAMILIES[family]
                version = "*" if version in ("", "latest") else f"*{version}"
                names = [pattern.format(arch=a, version=version) for a in ("x86_64", "arm64")]
                kwargs["Filters"].append({"Name": "name", "Values": names})
            if term.tags:
                kwargs["Filters"] += _tag_filters(term.tags)
            if term.owner:
                kwargs["Owners"] = [term.owner]
            page = await self._call("DescribeImages", self._ec2.describe_images, **kwargs)
            for i in page.get("Images", []):
                found[i["ImageId"]] = Image(
                    id=i["ImageId"],
                    name=i.get("Name", ""),
                    architecture=i.get("Architecture", "x86_64"),
                    creation_date=i.get("CreationDate", ""),
                )
        return list(found.values())

    async def ensure_launch_template(self, config: LaunchTemplateConfig) -> None:
        """Create the launch template unless this process or EC2 already has it."""
        if config.name in self._templates:
            return
        data: dict[str, Any] = {
            "ImageId": config.image_id,
            "UserData": base64.b64encode(config.user_data.encode()).decode(),
            "MetadataOptions": {
                "HttpEndpoint": config.metadata_options.http_endpoint,
                "HttpProtocolIpv6": config.metadata_options.http_protocol_ipv6,
                "HttpPutResponseHopLimit": config.metadata_options.http_put_response_hop_limit,
                "HttpTokens": config.metadata_options.http_tokens,
            },
        }
        if config.associate_public_ip_address:
            data["NetworkInterfaces"] = [
                {
                    "DeviceIndex": 0,
                    "AssociatePublicIpAddress": True,
                    "Groups": list(config.security_group_ids),
                }
            ]
        else:
            data["SecurityGroupIds"] = list(config.security_group_ids)
        if config.instance_profile:
            data["IamInstanceProfile"] = {"Name": config.instance_profile}
        if config.block_devices:
            data["BlockDeviceMappings"] = [_block_device(b) for b in config.block_devices]
        if config.capacity_reservation_id:
            data["CapacityReservationSpecification"] = {
                "CapacityReservationTarget": {
                    "CapacityReservationId": config.capacity_reservation_id
                }
            }
            if config.capacity_block:
                data["InstanceMarketOptions"] = {"MarketType": "capacity-block"}
        try:
            await self._call(
                "CreateLaunchTemplate",
                self._ec2.create_launch_template,
                LaunchTemplateName=config.name,
                LaunchTemplateData=data,
                TagSpecifications=[
                    {
                        "ResourceType": "launch-template",
                        "Tags": _tag_list({**config.tags, "Name": config.name}),
                    }
                ],
            )
            log.info("launch_template_created", launch_template=config.name)
        except CloudPermanentError as exc:
            if "AlreadyExists" not in exc.code:
                raise
        self._templates[config.name] = config

    async def find_capacity_reservations(
        self, terms: Sequence[CapacityReservationTerm]
    ) -> list[CapacityReservation]:
        """Active reservations matching any term: by id, or by tags (and owner)."""
        found: dict[str, CapacityReservation] = {}
        for term in terms:
            kwargs: dict[str, Any] = {"Filters": [{"Name": "state", "Values": ["active"]}]}
            if term.id:
                kwargs["CapacityReservationIds"] = [term.id]
            kwargs["Filters"] += _tag_filters(term.tags)
            if term.owner_id:
                kwargs["Filters"].append({"Name": "owner-id", "Values": [term.owner_id]})
            try:
                page = await self._call(
                    "DescribeCapacityReservations",
                    self._ec2.describe_capacity_reservations,
                    **kwargs,
                )
            except CloudPermanentError as exc:
                if exc.code.startswith("InvalidCapacityReservationId"):
                    continue  # an id that does not exist (any more) selects nothing
                raise
            for item in page.get("CapacityReservations", []):
                found[item["CapacityReservationId"]] = CapacityReservation(
                    id=item["CapacityReservationId"],
                    instance_type=item.get("InstanceType", ""),
                    zone=item.get("AvailabilityZone", ""),
                    owner_id=item.get("OwnerId", ""),
                    reservation_type=item.get("ReservationType") or "default",
                    instance_match_criteria=item.get("InstanceMatchCriteria", "open"),
                    available_instance_count=int(item.get("AvailableInstanceCount", 0)),
                    total_instance_count=int(item.get("TotalInstanceCount", 0)),
                    end_time=item.get("EndDate"),
                )
        return sorted(found.values(), key=lambda r: r.id)

    async def find_launch_templates(self, tags: Mapping[str, str]) -> list[LaunchTemplate]:
        """The launch templates carrying all `tags`, page by page."""
        found: list[LaunchTemplate] = []
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {"Filters": _tag_filters(tags), "MaxResults": 200}
            if token:
                kwargs["NextToken"] = token
            page = await self._call(
                "DescribeLaunchTemplates", self._ec2.describe_launch_templates, **kwargs
            )
            for item in page.get("LaunchTemplates", []):
                created = item.get("CreateTime")
                found.append(
                    LaunchTemplate(
                        name=item["LaunchTemplateName"],
                        created_seconds=created.timestamp() if created else 0.0,
                    )
                )
            token = page.get("NextToken")
            if not token:
                return found

    async def delete_launch_template(self, name: str) -> None:
        """Delete a launch template; one already gone is fine."""
        self._templates.pop(name, None)
        try:
            await self._call(
                "DeleteLaunchTemplate",
                self._ec2.delete_launch_template,
                LaunchTemplateName=name,
            )
        except CloudPermanentError as exc:
            if not _is_missing_template(exc.code):
                raise
        log.info("launch_template_deleted", launch_template=name)

    # Launch and terminate -----------------------------------------------------------------

    async def create_fleet(self, request: FleetRequest) -> FleetResult:
        """One instant CreateFleet call; capacity errors come back in the result."""
        zone_of = {o.subnet_id: o.zone for t in request.templates for o in t.overrides}
        # An instant fleet's capacity type: spot, on-demand or capacity-block (a Capacity
        # Block's options are on-demand ones; its templates name the block).
        options_key = "SpotOptions" if request.capacity_type == "spot" else "OnDemandOptions"
        kwargs: dict[str, Any] = {
            "Type": "instant",
            "ClientToken": request.client_token,
            "TargetCapacitySpecification": {
                "TotalTargetCapacity": 1,
                "DefaultTargetCapacityType": request.capacity_type,
            },
            options_key: {"AllocationStrategy": request.allocation_strategy},
            "LaunchTemplateConfigs": [
                {
                    "LaunchTemplateSpecification": {
                        "LaunchTemplateName": t.launch_template_name,
                        "Version": "$Latest",
                    },
                    "Overrides": [
                        {
                            "InstanceType": o.instance_type,
                            "SubnetId": o.subnet_id,
                            "AvailabilityZone": o.zone,
                            "Priority": o.priority,
                        }
                        for o in t.overrides
                    ],
                }
                for t in request.templates
            ],
            "TagSpecifications": [
                {"ResourceType": kind, "Tags": _tag_list(request.tags)}
                for kind in ("instance", "volume")
            ],
        }
        try:
            response = await self._create_fleet(request, kwargs)
        except CloudPermanentError as exc:
            if is_unavailable_offering(exc.code):
                return FleetResult(None, "", "", (FleetError("", "", exc.code, str(exc)),))
            raise
        errors = []
        for e in response.get("Errors", []):
            override = (e.get("LaunchTemplateAndOverrides") or {}).get("Overrides") or {}
            errors.append(
                FleetError(
                    instance_type=override.get("InstanceType", ""),
                    zone=override.get("AvailabilityZone")
                    or zone_of.get(override.get("SubnetId", ""), ""),
                    code=e.get("ErrorCode", "Unknown"),
                    message=e.get("ErrorMessage", ""),
                )
            )
        for launched in response.get("Instances", []):
            ids = launched.get("InstanceIds") or []
            if ids:
                override = (launched.get("LaunchTemplateAndOverrides") or {}).get("Overrides") or {}
                return FleetResult(
                    instance_id=ids[0],
                    instance_type=launched.get("InstanceType") or override.get("InstanceType", ""),
                    zone=override.get("AvailabilityZone")
                    or zone_of.get(override.get("SubnetId", ""), ""),
                    errors=tuple(errors),
                )
        return FleetResult(None, "", "", tuple(errors))

    async def _create_fleet(self, request: FleetRequest, kwargs: dict[str, Any]) -> Any:
        """CreateFleet; when a launch template it names was deleted (garbage collection on
        another replica), re-create the templates this process knows and send it once more
        (a refused call used no ClientToken)."""
        try:
            return await self._call("CreateFleet", self._ec2.create_fleet, **kwargs)
        except CloudPermanentError as exc:
            names = [t.launch_template_name for t in request.templates]
            if not _is_missing_template(exc.code) or not all(n in self._templates for n in names):
                raise
            configs = [self._templates.pop(n) for n in names]
            for config in configs:
                await self.ensure_launch_template(config)
            return await self._call("CreateFleet", self._ec2.create_fleet, **kwargs)

    async def find_instances(
        self,
        tags: Mapping[str, str],
        *,
        include_terminated: bool = False,
        instance_ids: Sequence[str] | None = None,
    ) -> list[Instance]:
        """Instances carrying all `tags`, filtered by EC2 and read page by page (NextToken);
        only those of `instance_ids` when given, asked for in groups of EC2's 200 filter values
        (an `instance-id` filter, not InstanceIds: an unknown id is not an error)."""
        if instance_ids is not None:
            ids = list(dict.fromkeys(instance_ids))
            found: list[Instance] = []
            for start in range(0, len(ids), _MAX_FILTER_VALUES):
                group = ids[start : start + _MAX_FILTER_VALUES]
                found += await self._describe(
                    tags, include_terminated, [{"Name": "instance-id", "Values": group}]
                )
            return found
        return await self._describe(tags, include_terminated, [])

    async def _describe(
        self, tags: Mapping[str, str], include_terminated: bool, extra: list[dict[str, Any]]
    ) -> list[Instance]:
        filters = _tag_filters(tags) + extra
        if not include_terminated:
            filters.append({"Name": "instance-state-name", "Values": _ALIVE_STATES})
        instances: list[Instance] = []
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {"Filters": filters, "MaxResults": self.describe_page_size}
            if token:
                kwargs["NextToken"] = token
            page = await self._call("DescribeInstances", self._ec2.describe_instances, **kwargs)
            for reservation in page.get("Reservations", []):
                instances += [_instance(i) for i in reservation.get("Instances", [])]
            token = page.get("NextToken")
            if not token:
                return instances

    async def terminate_instances(self, instance_ids: Sequence[str]) -> dict[str, str]:
        """Terminate; each instance's state after the call."""
        response = await self._call(
            "TerminateInstances",
            self._ec2.terminate_instances,
            InstanceIds=list(instance_ids),
        )
        return {
            i["InstanceId"]: i.get("CurrentState", {}).get("Name", "")
            for i in response.get("TerminatingInstances", [])
        }

    # Interruption queue -------------------------------------------------------------------

    async def queue_url(self, queue: str) -> str:
        """A queue URL from a name or URL."""
        if queue.startswith(("http://", "https://")):
            return queue
        response = await self._call("GetQueueUrl", self._sqs.get_queue_url, QueueName=queue)
        return str(response["QueueUrl"])

    async def receive_messages(self, queue_url: str, wait_seconds: int) -> list[QueueMessage]:
        """Long-poll up to 10 messages."""
        response = await self._call(
            "ReceiveMessage",
            self._sqs.receive_message,
            QueueUrl=queue_url,
            WaitTimeSeconds=wait_seconds,
            MaxNumberOfMessages=10,
        )
        return [
            QueueMessage(receipt_handle=m["ReceiptHandle"], body=m.get("Body", ""))
            for m in response.get("Messages", [])
        ]

    async def delete_message(self, queue_url: str, receipt_handle: str) -> None:
        """Delete one received message."""
        await self._call(
            "DeleteMessage",
            self._sqs.delete_message,
            QueueUrl=queue_url,
            ReceiptHandle=receipt_handle,
        )

    async def release_message(self, queue_url: str, receipt_handle: str) -> None:
        """Make one received message visible again at once."""
        await self._call(
            "ChangeMessageVisibility",
            self._sqs.change_message_visibility,
            QueueUrl=queue_url,
            ReceiptHandle=receipt_handle,
            VisibilityTimeout=0,
        )


def _is_missing_template(code: str) -> bool:
    """InvalidLaunchTemplateName.NotFoundException, InvalidLaunchTemplateId.NotFound, ..."""
    return code.startswith(
        ("InvalidLaunchTemplateName.NotFound", "InvalidLaunchTemplateId.NotFound")
    )


def _block_device(device: BlockDevice) -> dict[str, Any]:
    ebs: dict[str, Any] = {
        "VolumeType": device.volume_type or "gp3",
        "Encrypted": device.encrypted,
        "DeleteOnTermination": device.delete_on_termination,
    }
    if device.volume_size_bytes:
        ebs["VolumeSize"] = max(1, device.volume_size_bytes // 1024**3)
    if device.iops:
        ebs["Iops"] = device.iops
    if device.throughput_mibps:
        ebs["Throughput"] = device.throughput_mibps
    if device.kms_key_id:
        ebs["KmsKeyId"] = device.kms_key_id
    if device.snapshot_id:
        ebs["SnapshotId"] = device.snapshot_id
    return {"DeviceName": device.device_name, "Ebs": ebs}


def _instance(data: Mapping[str, Any]) -> Instance:
    lifecycle = data.get("InstanceLifecycle")
    reservation = str(data.get("CapacityReservationId") or "")
    capacity_type = "spot" if lifecycle == "spot" else "on-demand"
    if reservation:
        capacity_type = "reserved"
    return Instance(
        id=data["InstanceId"],
        instance_type=data.get("InstanceType", ""),
        zone=data.get("Placement", {}).get("AvailabilityZone", ""),
        capacity_type=capacity_type,
        capacity_reservation_id=reservation,
        capacity_reservation_type=(
            ("capacity-block" if lifecycle == "capacity-block" else "default")
            if reservation
            else ""
        ),
        state=data.get("State", {}).get("Name", ""),
        image_id=data.get("ImageId", ""),
        launch_time=data.get("LaunchTime"),
        tags=_tags_dict(data.get("Tags")),
        subnet_id=str(data.get("SubnetId") or ""),
        security_group_ids=_security_group_ids(data),
    )


def _security_group_ids(data: Mapping[str, Any]) -> tuple[str, ...]:
    """The instance's security groups (its SecurityGroups[], else its interfaces' Groups[])."""
    groups = list(data.get("SecurityGroups") or [])
    if not groups:
        groups = [g for i in data.get("NetworkInterfaces") or [] for g in i.get("Groups") or []]
    return tuple(sorted({str(g["GroupId"]) for g in groups if g.get("GroupId")}))
