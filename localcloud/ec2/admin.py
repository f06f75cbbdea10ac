"""The emulator's admin API under `/_localcloud/`: capacity pools, injected faults and
CreateFleet answers, capacity reservations, interruption messages, impaired instances, and the
recorded CreateFleet calls (JSON in and out; a bad body is a 400 naming the problem)."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from werkzeug.wrappers import Request, Response

from localcloud.ec2.capacity import PoolKey

if TYPE_CHECKING:
    from localcloud.ec2.app import EmulatorState

ADMIN_PREFIX = "/_localcloud/"


def json_response(payload: Any, status: int = 200) -> Response:
    return Response(json.dumps(payload), status=status, content_type="application/json")


class AdminApi:
    """Answers the admin requests against the emulator's shared state."""

    def __init__(self, state: EmulatorState) -> None:
        self._state = state

    def __call__(self, request: Request) -> Response:
        path = request.path[len(ADMIN_PREFIX) :].strip("/")
        try:
            return self._admin_route(path, request)
        except (ValueError, KeyError, TypeError) as error:
            return json_response({"error": f"{type(error).__name__}: {error}"}, 400)

    def _admin_route(self, path: str, request: Request) -> Response:
        routes: dict[tuple[str, str], Callable[[dict[str, Any]], Any]] = {
            ("GET", "health"): self._admin_health,
            ("POST", "capacity"): self._admin_set_capacity,
            ("GET", "capacity"): self._admin_capacity,
            ("DELETE", "capacity"): lambda _: self._state.pools.reset(),
            ("POST", "faults"): self._admin_inject_fault,
            ("GET", "faults"): self._admin_faults,
            ("DELETE", "faults"): lambda _: self._clear_faults(),
            ("POST", "fleet-answers"): self._admin_inject_fleet_answer,
            ("POST", "interrupt"): self._admin_interrupt,
            ("POST", "impair"): self._admin_impair,
            ("GET", "create-fleet-calls"): lambda _: [
                call.to_json() for call in self._state.create_fleet_calls()
            ],
            ("DELETE", "create-fleet-calls"): lambda _: self._state.clear_create_fleet_calls(),
            ("POST", "capacity-reservations"): self._admin_create_reservation,
        }
        handler = routes.get((request.method, path))
        if handler is None:
            return json_response(
                {"error": f"no admin route {request.method} {ADMIN_PREFIX}{path}"}, 404
            )
        payload = request.get_json(silent=True) if request.method == "POST" else None
        if request.method == "POST" and not isinstance(payload, dict):
            raise ValueError(f"POST {ADMIN_PREFIX}{path} needs a JSON object body")
        result = handler(payload or {})
        return json_response({"ok": True} if result is None else result)

    def _admin_health(self, _: dict[str, Any]) -> dict[str, Any]:
        state = self._state
        return {
            "ready": True,
            "endpoint_url": state.endpoint_url,
            "region": state.region,
            "cluster_name": state.cluster_name,
            "interruption_queue_url": state.interruption_queue_url,
        }

    def _admin_set_capacity(self, payload: dict[str, Any]) -> None:
        pool = PoolKey(
            str(payload["instance_type"]), str(payload["zone"]), str(payload["capacity_type"])
        )
        self._state.pools.set(
            pool,
            available=bool(payload["available"]),
            error_code=str(payload.get("error_code") or "InsufficientInstanceCapacity"),
        )

    def _admin_capacity(self, _: dict[str, Any]) -> dict[str, Any]:
        unavailable = self._state.pools.unavailable().items()
        return {
            "unavailable": [{**pool.to_json(), "error_code": code} for pool, code in unavailable]
        }

    def _admin_inject_fault(self, payload: dict[str, Any]) -> None:
        self._state.faults.inject(
            action=str(payload["action"]),
            error_code=str(payload["error_code"]),
            count=int(payload.get("count", 1)),
            http_status=int(payload["http_status"]) if "http_status" in payload else None,
            message=payload.get("message"),
        )

    def _admin_faults(self, _: dict[str, Any]) -> dict[str, Any]:
        pending = self._state.faults.pending()
        answers = self._state.fleet_answers.pending()
        return {
            "pending": [
                {"action": f.action, "error_code": f.error_code, "remaining": n} for f, n in pending
            ],
            "fleet_answers": [
                {"kind": a.kind, "error_code": a.error_code, "remaining": n} for a, n in answers
            ],
        }

    def _admin_inject_fleet_answer(self, payload: dict[str, Any]) -> None:
        self._state.fleet_answers.inject(
            kind=str(payload["kind"]),
            count=int(payload.get("count", 1)),
            error_code=str(payload["error_code"]) if "error_code" in payload else None,
        )

    def _clear_faults(self) -> None:
        self._state.faults.reset()
        self._state.fleet_answers.reset()

    def _admin_impair(self, payload: dict[str, Any]) -> None:
        if self._state.impair is None:
            raise ValueError("the emulator cannot impair instances before it has started")
        self._state.impair(payload)

    def _admin_create_reservation(self, payload: dict[str, Any]) -> dict[str, Any]:
        """An On-Demand Capacity Reservation or (reservation_type capacity-block, with
        end_date ISO 8601) a Capacity Block; answers DescribeCapacityReservations' item."""
        from localcloud.ec2.app import DEFAULT_ACCOUNT_ID  # app imports this module

        end = payload.get("end_date")
        state = self._state
        reservation = state.reservations.create(
            instance_type=str(payload["instance_type"]),
            zone=str(payload["zone"]),
            count=int(payload["count"]),
            owner_id=str(payload.get("owner_id") or DEFAULT_ACCOUNT_ID),
            reservation_type=str(payload.get("reservation_type") or "default"),
            end_date=datetime.fromisoformat(str(end)) if end else None,
            tags={str(k): str(v) for k, v in (payload.get("tags") or {}).items()},
        )
        item = reservation.to_response(state.reservations.clock(), state.region)
        answer: dict[str, Any] = json.loads(json.dumps(item, default=str))
        return answer

    def _admin_interrupt(self, payload: dict[str, Any]) -> dict[str, Any]:
        if self._state.send_event is None:
            raise ValueError("the emulator cannot send events before it has started")
        return self._state.send_event(payload)
