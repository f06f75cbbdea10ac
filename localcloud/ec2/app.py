"""The emulator's WSGI app: moto's server behind a middleware that adds the realism daiku needs.

Requests are routed as follows:
- `/_localcloud/...`: the admin API (capacity pools, faults, interruptions, recorded calls);
- EC2 query requests: an injected fault answers first; instant `CreateFleet` and
  `DescribeSpotPriceHistory` are answered here; everything else goes to moto;
- `AWSPriceListService.GetProducts` (Pricing, JSON protocol) is answered here;
- anything else (SQS, ...) goes to moto unchanged.

moto's backends are not thread-safe and werkzeug serves each request on its own thread, so EC2
requests are serialized by one lock. SQS requests are not: a long-polling ReceiveMessage would
otherwise stall every EC2 call behind it.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qsl
from xml.sax.saxutils import escape

import structlog
from werkzeug.datastructures import Headers, MultiDict
from werkzeug.wrappers import Request, Response

from localcloud.ec2.admin import ADMIN_PREFIX, AdminApi, json_response
from localcloud.ec2.capacity import (
    CapacityPools,
    FaultInjector,
    FleetAnswers,
    InjectedFault,
    InjectedFleetAnswer,
    PoolKey,
)
from localcloud.ec2.describe_instances import DescribeError, InstanceResponses, changes_instances
from localcloud.ec2.fleet import FleetContext, FleetOutcome, FleetRequestError, run_instant_fleet
from localcloud.ec2.pricing import get_products
from localcloud.ec2.reservations import CapacityReservations, ReservationError
from localcloud.ec2.spot_prices import spot_price

log = structlog.get_logger(__name__)

EC2_API_VERSION = "2016-11-15"
DEFAULT_ACCOUNT_ID = "123456789012"
SPOT_PRODUCT_DESCRIPTION = "Linux/UNIX"
SPOT_PRICE_PAGE_SIZE = 1000
_CREDENTIAL_SCOPE = re.compile(r"Credential=([^/,\s]+)/\d{8}/([^/]+)/([^/]+)/aws4_request")

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


@dataclass(frozen=True)
class CreateFleetCall:
    """One CreateFleet request as the emulator saw it (the benchmark reads these)."""

    received_monotonic_seconds: float
    responded_monotonic_seconds: float
    client_token: str | None
    capacity_type: str | None
    overrides: tuple[PoolKey, ...]
    instance_ids: tuple[str, ...]
    launched_pool: PoolKey | None
    errors: tuple[tuple[PoolKey, str], ...]
    request_error: str | None = None
    idempotent_replay: bool = False
    allocation_strategy: str = ""
    injected_answer: str | None = None  # the kind, when an injected answer was given

    def to_json(self) -> dict[str, Any]:
        return {
            "received_monotonic_seconds": self.received_monotonic_seconds,
            "responded_monotonic_seconds": self.responded_monotonic_seconds,
            "client_token": self.client_token,
            "capacity_type": self.capacity_type,
            "overrides": [pool.to_json() for pool in self.overrides],
            "instance_ids": list(self.instance_ids),
            "launched_pool": self.launched_pool.to_json() if self.launched_pool else None,
            "errors": [{**pool.to_json(), "error_code": code} for pool, code in self.errors],
            "request_error": self.request_error,
            "idempotent_replay": self.idempotent_replay,
            "allocation_strategy": self.allocation_strategy,
            "injected_answer": self.injected_answer,
        }


@dataclass
class EmulatorState:
    """Everything the middleware and the emulator's controls share."""

    region: str
    cluster_name: str
    context: FleetContext
    pools: CapacityPools = field(default_factory=CapacityPools)
    faults: FaultInjector = field(default_factory=FaultInjector)
    fleet_answers: FleetAnswers = field(default_factory=FleetAnswers)
    reservations: CapacityReservations = field(default_factory=CapacityReservations)
    ec2_lock: threading.RLock = field(default_factory=threading.RLock)
    # DescribeInstances renderings, reused while instances stay the same (under ec2_lock)
    instance_responses: InstanceResponses = field(default_factory=InstanceResponses)
    # False: moto answers DescribeInstances itself (slow with many instances; for comparison)
    fast_describe_instances: bool = True
    endpoint_url: str = ""
    interruption_queue_url: str = ""
    send_event: Callable[[Mapping[str, Any]], dict[str, Any]] | None = None
    # Fails (or passes again) an instance's status checks (`Ec2Emulator.impair_instance`).
    impair: Callable[[Mapping[str, Any]], None] | None = None
    # Called with the ids of instances a successful TerminateInstances terminated.
    on_instances_terminated: Callable[[list[str]], None] | None = None
    _calls_lock: threading.Lock = field(default_factory=threading.Lock)
    _calls: list[CreateFleetCall] = field(default_factory=list)
    # (account, region, client token) -> (request fingerprint, response body)
    _fleets_by_token: dict[tuple[str, str, str], tuple[str, bytes]] = field(default_factory=dict)

    def fleet_for_token(self, key: tuple[str, str, str]) -> tuple[str, bytes] | None:
        """(request fingerprint, response body) of the fleet created with this ClientToken."""
        return self._fleets_by_token.get(key)

    def remember_fleet(self, key: tuple[str, str, str], fingerprint: str, body: bytes) -> None:
        self._fleets_by_token[key] = (fingerprint, body)

    def record(self, call: CreateFleetCall) -> None:
        with self._calls_lock:
            self._calls.append(call)

    def create_fleet_calls(self) -> list[CreateFleetCall]:
        with self._calls_lock:
            return list(self._calls)

    def clear_create_fleet_calls(self) -> None:
        with self._calls_lock:
            self._calls.clear()


def ec2_error_response(code: str, message: str, status: int) -> Response:
    """An error in EC2's XML shape, which botocore maps to ClientError(code)."""
    body = (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f"<Response><Errors><Error><Code>{escape(code)}</Code>"
        f"<Message>{escape(message)}</Message></Error></Errors>"
        f"<RequestID>{uuid.uuid4()}</RequestID></Response>"
    )
    return Response(body, status=status, content_type="text/xml")


def _account_and_region(request: Request, default_region: str) -> tuple[str, str]:
    if "MOTO_ACCOUNT_ID" in os.environ:
        account = os.environ["MOTO_ACCOUNT_ID"]
    elif "x-moto-account-id" in request.headers:
        account = request.headers["x-moto-account-id"]
    else:
        account = DEFAULT_ACCOUNT_ID
    region = default_region
    match = _CREDENTIAL_SCOPE.search(request.headers.get("Authorization", ""))
    if match:
        region = match.group(2)
        if "MOTO_ACCOUNT_ID" not in os.environ and "x-moto-account-id" not in request.headers:
            from moto.iam.models import get_account_id_from

            account = str(get_account_id_from(match.group(1)))
    return account, region


def _ec2_backend(account: str, region: str) -> Any:
    from moto.ec2.models import ec2_backends

    return ec2_backends[account][region]


def _parse_ec2(action: str, form: MultiDict[str, str]) -> dict[str, Any]:
    from moto.core.parse import EC2QueryParser
    from moto.core.utils import get_service_model

    operation = get_service_model("ec2").operation_model(action)
    parsed: dict[str, Any] = EC2QueryParser(operation).parse(
        {
            "method": "POST",
            "values": form,
            "headers": Headers(),
            "body": b"",
            "url_path": "/",
            "url_params": {},
        }
    )
    return parsed


def _serialize_ec2(action: str, result: Mapping[str, Any]) -> bytes:
    from moto.core.serialize import EC2Serializer, SerializationContext
    from moto.core.utils import get_service_model

    operation = get_service_model("ec2").operation_model(action)
    context = SerializationContext(request_id=str(uuid.uuid4()))
    serialized = EC2Serializer(operation, context=context).serialize(result)
    body = serialized["body"]
    return body.encode() if isinstance(body, str) else bytes(body)


class Ec2EmulatorApp:
    """WSGI middleware in front of moto's server app."""

    def __init__(self, moto_app: WsgiApp, state: EmulatorState) -> None:
        self._moto_app = moto_app
        self._state = state
        self._admin = AdminApi(state)

    def __call__(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        received = time.monotonic()
        request = Request(environ)
        if request.path.startswith(ADMIN_PREFIX):
            return self._admin(request)(environ, start_response)
        body = request.get_data()
        # moto reads the body again from the stream.
        environ["wsgi.input"] = io.BytesIO(body)
        environ["CONTENT_LENGTH"] = str(len(body))
        form = self._ec2_form(request, body)
        response = self._emulated(request, form, body, received)
        if response is not None:
            return response(environ, start_response)
        if form is None:
            return self._moto_app(environ, start_response)
        statuses: list[str] = []

        def capture_status(status: str, headers: Any, exc_info: Any = None) -> Any:
            statuses.append(status)
            return start_response(status, headers, exc_info)

        action = form.get("Action", "")
        with self._state.ec2_lock:
            # moto builds the whole body inside the call, so the lock covers the backend work.
            answer = list(self._moto_app(environ, capture_status))
            if changes_instances(action):
                self._state.instance_responses.invalidate()
        if action == "TerminateInstances" and statuses[0].startswith("200"):
            terminated = list(_parse_ec2("TerminateInstances", form).get("InstanceIds") or [])
            self._state.reservations.release(terminated)
            notify = self._state.on_instances_terminated
            if notify:
                notify(terminated)
        return answer

    def _emulated(
        self, request: Request, form: MultiDict[str, str] | None, body: bytes, received: float
    ) -> Response | None:
        """The emulator's own answer to this request, or None to let moto answer."""
        target = request.headers.get("X-Amz-Target", "")
        if target.startswith("AWSPriceListService."):
            return self._pricing(target.split(".", 1)[1], body)
        if form is None:
            return None
        action = form.get("Action", "")
        fault = self._state.faults.take(action)
        if fault is not None:
            return self._fault(action, fault, form, received)
        if action == "CreateFleet" and form.get("Type") == "instant":
            return self._create_fleet(request, form, received)
        answer: Callable[[Request, MultiDict[str, str]], Response | None] | None = {
            "DescribeSpotPriceHistory": self._spot_price_history,
            "DescribeInstances": self._describe_instances,
            "DeleteLaunchTemplate": self._delete_launch_template,
            "CreateCapacityReservation": self._capacity_reservations,
            "DescribeCapacityReservations": self._capacity_reservations,
            "CancelCapacityReservation": self._capacity_reservations,
        }.get(action)
        return None if answer is None else answer(request, form)

    def _delete_launch_template(
        self, request: Request, form: MultiDict[str, str]
    ) -> Response | None:
        """EC2's answer for a name that does not exist (moto says MissingParameter)."""
        name = form.get("LaunchTemplateName")
        if not name:
            return None
        account, region = _account_and_region(request, self._state.region)
        with self._state.ec2_lock:
            known = name in _ec2_backend(account, region).launch_template_name_to_ids
        if known:
            return None
        return ec2_error_response(
            "InvalidLaunchTemplateName.NotFoundException",
            f"The specified launch template, with template name {name}, does not exist.",
            400,
        )

    def _capacity_reservations(self, request: Request, form: MultiDict[str, str]) -> Response:
        """Create, Describe and CancelCapacityReservation (moto has none of them)."""
        account, region = _account_and_region(request, self._state.region)
        action = form.get("Action", "")
        params = _parse_ec2(action, form)
        reservations = self._state.reservations
        result: dict[str, Any]
        try:
            if action == "CreateCapacityReservation":
                tags = {
                    str(t["Key"]): str(t.get("Value", ""))
                    for spec in params.get("TagSpecifications") or []
                    for t in spec.get("Tags") or []
                }
                created = reservations.create(
                    instance_type=str(params["InstanceType"]),
                    zone=str(params.get("AvailabilityZone") or f"{region}a"),
                    count=int(params["InstanceCount"]),
                    owner_id=account,
                    end_date=params.get("EndDate"),
                    tags=tags,
                    instance_match_criteria=str(params.get("InstanceMatchCriteria") or "open"),
                )
                result = {"CapacityReservation": created.to_response(reservations.clock(), region)}
            elif action == "CancelCapacityReservation":
                reservations.cancel(str(params["CapacityReservationId"]))
                result = {"Return": True}
            else:
                filters = {
                    str(f["Name"]): [str(v) for v in f.get("Values") or []]
                    for f in params.get("Filters") or []
                }
                result = {
                    "CapacityReservations": reservations.describe(
                        params.get("CapacityReservationIds") or [], filters, region
                    )
                }
        except ReservationError as error:
            return ec2_error_response(error.code, error.message, 400)
        return Response(_serialize_ec2(action, result), status=200, content_type="text/xml")

    def _describe_instances(self, request: Request, form: MultiDict[str, str]) -> Response | None:
        if not self._state.fast_describe_instances:
            return None
        account, region = _account_and_region(request, self._state.region)
        params = _parse_ec2("DescribeInstances", form)
        with self._state.ec2_lock:
            try:
                body = self._state.instance_responses.answer(_ec2_backend(account, region), params)
            except DescribeError as error:
                return ec2_error_response(error.code, error.message, 400)
            except Exception:  # a bug here must not take DescribeInstances down: moto answers
                log.exception("describe_instances_fast_path_failed")
                return None
        return None if body is None else Response(body, status=200, content_type="text/xml")

    @staticmethod
    def _ec2_form(request: Request, body: bytes) -> MultiDict[str, str] | None:
        content_type = request.headers.get("Content-Type", "")
        authorization = request.headers.get("Authorization", "")
        if "x-www-form-urlencoded" not in content_type and request.method != "GET":
            return None
        pairs = parse_qsl(body.decode("utf-8"), keep_blank_values=True) if body else []
        pairs += list(request.args.items(multi=True))
        form: MultiDict[str, str] = MultiDict(pairs)
        match = _CREDENTIAL_SCOPE.search(authorization)
        is_ec2 = (match is not None and match.group(3) == "ec2") or (
            match is None and form.get("Version") == EC2_API_VERSION
        )
        return form if is_ec2 and form.get("Action") else None

    def _fault(
        self, action: str, fault: InjectedFault, form: MultiDict[str, str], received: float
    ) -> Response:
        log.info("fault_injected", action=action, error_code=fault.error_code)
        if action == "CreateFleet":
            self._record_unlaunched(
                form.get("ClientToken"), received, request_error=fault.error_code
            )
        return ec2_error_response(fault.error_code, fault.message, fault.http_status)

    def _create_fleet(
        self, request: Request, form: MultiDict[str, str], received: float
    ) -> Response:
        state = self._state
        account, region = _account_and_region(request, state.region)
        params = _parse_ec2("CreateFleet", form)
        token = params.get("ClientToken")
        fingerprint = hashlib.sha256(
            json.dumps(
                {k: v for k, v in params.items() if k != "ClientToken"}, sort_keys=True, default=str
            ).encode()
        ).hexdigest()
        with state.ec2_lock:
            if token:
                cached = state.fleet_for_token((account, region, token))
                if cached is not None:
                    return self._replay(cached, fingerprint, token, received)
            from moto.ec2.utils import random_fleet_id

            fleet_id = random_fleet_id()
            injected = state.fleet_answers.take()
            if injected is not None:
                key = (account, region, token)
                return self._injected_answer(injected, fleet_id, key, fingerprint, received)
            context = state.context
            if region != state.region:
                context = fleet_context_for_region(region)
            try:
                outcome = run_instant_fleet(
                    params,
                    backend=_ec2_backend(account, region),
                    pools=state.pools,
                    context=context,
                    fleet_id=fleet_id,
                    launch_tags={"instance": {"aws:ec2:fleet-id": fleet_id}},
                    reservations=state.reservations,
                )
            except FleetRequestError as error:
                self._record_failure(token, received, error.code)
                return ec2_error_response(error.code, error.message, 400)
            except Exception as error:  # moto's own validation errors carry an AWS code
                code = str(getattr(error, "code", "InternalError"))
                self._record_failure(token, received, code)
                log.warning("create_fleet_failed", error_code=code, error=str(error))
                return ec2_error_response(code, str(getattr(error, "message", error)), 400)
            body = _serialize_ec2("CreateFleet", outcome.to_response())
            if token:
                state.remember_fleet((account, region, token), fingerprint, body)
        self._record_outcome(outcome, token, received)
        return Response(body, status=200, content_type="text/xml")

    def _injected_answer(
        self,
        injected: InjectedFleetAnswer,
        fleet_id: str,
        key: tuple[str, str, str | None],
        fingerprint: str,
        received: float,
    ) -> Response:
        """The injected answer, remembered under the ClientToken as a real one would be (a
        retry with the same token gets it again). Called under the EC2 lock."""
        body = _serialize_ec2(
            "CreateFleet", {"FleetId": fleet_id, "Errors": injected.errors(), "Instances": []}
        )
        account, region, token = key
        if token:
            self._state.remember_fleet((account, region, token), fingerprint, body)
        self._record_unlaunched(token, received, injected_answer=injected.kind)
        log.info("fleet_answer_injected", kind=injected.kind, error_code=injected.error_code)
        return Response(body, status=200, content_type="text/xml")

    def _replay(
        self, cached: tuple[str, bytes], fingerprint: str, token: str, received: float
    ) -> Response:
        cached_fingerprint, body = cached
        if cached_fingerprint != fingerprint:
            self._record_failure(token, received, "IdempotentParameterMismatch")
            return ec2_error_response(
                "IdempotentParameterMismatch",
                f"The client token {token} was already used with different parameters.",
                400,
            )
        self._record_unlaunched(token, received, idempotent_replay=True)
        return Response(body, status=200, content_type="text/xml")

    def _record_failure(self, token: str | None, received: float, code: str) -> None:
        self._record_unlaunched(token, received, request_error=code)

    def _record_unlaunched(
        self,
        token: str | None,
        received: float,
        *,
        request_error: str | None = None,
        idempotent_replay: bool = False,
        injected_answer: str | None = None,
    ) -> None:
        """A CreateFleet call that launched nothing itself: refused, replayed or injected."""
        self._state.record(
            CreateFleetCall(
                received_monotonic_seconds=received,
                responded_monotonic_seconds=time.monotonic(),
                client_token=token,
                capacity_type=None,
                overrides=(),
                instance_ids=(),
                launched_pool=None,
                errors=(),
                request_error=request_error,
                idempotent_replay=idempotent_replay,
                injected_answer=injected_answer,
            )
        )

    def _record_outcome(self, outcome: FleetOutcome, token: str | None, received: float) -> None:
        capacity_type = outcome.capacity_type
        launch = outcome.launch
        self._state.record(
            CreateFleetCall(
                received_monotonic_seconds=received,
                responded_monotonic_seconds=time.monotonic(),
                client_token=token,
                capacity_type=capacity_type,
                overrides=tuple(c.pool(capacity_type) for c in outcome.candidates),
                instance_ids=launch.instance_ids if launch else (),
                launched_pool=launch.candidate.pool(capacity_type) if launch else None,
                errors=tuple(
                    (e.candidate.pool(capacity_type), e.error_code) for e in outcome.errors
                ),
                allocation_strategy=outcome.allocation_strategy,
            )
        )
        log.info(
            "create_fleet",
            fleet_id=outcome.fleet_id,
            capacity_type=capacity_type,
            launched=launch.candidate.pool(capacity_type).to_json() if launch else None,
            error_count=len(outcome.errors),
        )

    def _spot_price_history(self, request: Request, form: MultiDict[str, str]) -> Response:
        _, region = _account_and_region(request, self._state.region)
        params = _parse_ec2("DescribeSpotPriceHistory", form)
        context = (
            self._state.context
            if region == self._state.region
            else fleet_context_for_region(region)
        )
        wanted_types = set(params.get("InstanceTypes") or [])
        wanted_zones: set[str] = set()
        if params.get("AvailabilityZone"):
            wanted_zones.add(str(params["AvailabilityZone"]))
        for filter_ in params.get("Filters") or []:
            values = set(filter_.get("Values") or [])
            if filter_.get("Name") == "instance-type":
                wanted_types |= values
            elif filter_.get("Name") == "availability-zone":
                wanted_zones |= values
        now = datetime.now(UTC)
        history = [
            {
                "AvailabilityZone": zone,
                "InstanceType": instance_type,
                "ProductDescription": SPOT_PRODUCT_DESCRIPTION,
                "SpotPrice": f"{spot_price(instance_type, zone, on_demand):.6f}",
                "Timestamp": now,
            }
            for instance_type, zones in context.instance_type_zones.items()
            if (not wanted_types or instance_type in wanted_types)
            and (on_demand := context.on_demand_prices.get(instance_type)) is not None
            for zone in zones
            if not wanted_zones or zone in wanted_zones
        ]
        page_size = int(params.get("MaxResults") or SPOT_PRICE_PAGE_SIZE)
        start = int(params.get("NextToken") or 0)
        result: dict[str, Any] = {"SpotPriceHistory": history[start : start + page_size]}
        if start + page_size < len(history):
            result["NextToken"] = str(start + page_size)
        return Response(
            _serialize_ec2("DescribeSpotPriceHistory", result), status=200, content_type="text/xml"
        )

    def _pricing(self, operation: str, body: bytes) -> Response:
        if operation != "GetProducts":
            return json_response(
                {"__type": "InvalidParameterException", "Message": f"{operation} is not emulated"},
                400,
            )
        try:
            payload = json.loads(body or b"{}")
            result = get_products(payload)
        except (ValueError, KeyError) as error:
            return json_response(
                {"__type": "InvalidParameterException", "Message": str(error)}, 400
            )
        return Response(json.dumps(result), status=200, content_type="application/x-amz-json-1.1")


def fleet_context_for_region(region: str) -> FleetContext:
    from localcloud.ec2.instance_types import emulated_on_demand_prices, instance_type_zones

    prices = emulated_on_demand_prices(region)
    try:
        zones = instance_type_zones(region)
    except ValueError:
        zones = {}
    return FleetContext(region=region, on_demand_prices=prices, instance_type_zones=zones)
