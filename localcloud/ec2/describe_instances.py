"""DescribeInstances answered by the emulator: moto's selection, EC2's paging, cached rendering.

moto renders an instance through its generic, reflective serializer (about a millisecond per
instance), so listing a thousand-node cluster took seconds, all of it under the EC2 lock and in
the process that also serves localcloud's Kubernetes API. Callers list the whole cluster often
(the actuator's ListNodeClaims behind the scheduler's garbage collection, every 10 s).

`InstanceResponses.answer` keeps moto's semantics where they are right and EC2's where moto
differs:

- selection: moto's own backend calls (`describe_instances(filters)`,
  `get_reservations_by_instance_ids(ids, filters)`), so filters mean what they mean in moto;
- paging as EC2 documents it: `MaxResults` 5-1000 (by reservation; the emulator launches one
  instance per reservation), an opaque `NextToken`, `MaxResults` not allowed with
  `InstanceIds`, and every match returned when `MaxResults` is absent (moto stops at 100, even
  for a list of instance ids);
- rendering: each reservation item is serialized by moto's EC2 serializer, exactly as moto
  renders it, once, and reused while its instances' ids, states and tags stay the same.
  Any EC2 action outside `CACHE_SAFE_ACTIONS` clears the cache (`invalidate`), since it may
  change something else an instance shows (security groups, attributes, addresses...).

Anything the fast path does not handle (DryRun, a moto error) returns None: moto answers.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

MIN_MAX_RESULTS: Final = 5
MAX_MAX_RESULTS: Final = 1000
# Actions that change no existing instance's rendering beyond its state and tags (both part of
# the cache key) or only create new reservations; reads (Describe*, Get*, List*) neither.
CACHE_SAFE_ACTIONS: Final = frozenset(
    {
        "CreateFleet",
        "RunInstances",
        "CreateTags",
        "DeleteTags",
        "TerminateInstances",
        "CreateLaunchTemplate",
        "CreateLaunchTemplateVersion",
        "DeleteLaunchTemplate",
    }
)
_READ_PREFIXES: Final = ("Describe", "Get", "List")
_EMPTY_SET: Final = "<reservationSet/>"
_OPEN_SET: Final = "<reservationSet>"
_CLOSE_SET: Final = "</reservationSet>"


def changes_instances(action: str) -> bool:
    """Whether an EC2 action may change what cached instance renderings show."""
    return action not in CACHE_SAFE_ACTIONS and not action.startswith(_READ_PREFIXES)


@dataclass(frozen=True)
class DescribeError(Exception):
    """A request EC2 rejects (answered with EC2's error shape, HTTP 400)."""

    code: str
    message: str


def _serializer() -> Any:
    """moto's EC2 serializer for DescribeInstances, configured as moto's own responses are."""
    from moto import settings
    from moto.core.serialize import EC2Serializer, XFormedAttributePicker
    from moto.core.utils import get_service_model
    from moto.ec2.responses import EC2Response

    return EC2Serializer(
        get_service_model("ec2").operation_model("DescribeInstances"),
        pretty_print=settings.PRETTIFY_RESPONSES,
        value_picker=XFormedAttributePicker(
            response_transformers=EC2Response.RESPONSE_KEY_PATH_TO_TRANSFORMER
        ),
    )


def _render(result: Mapping[str, Any]) -> str:
    body = _serializer().serialize(result)["body"]
    return body.decode() if isinstance(body, bytes) else str(body)


def _instance_key(instance: Any, tags: Mapping[str, str]) -> tuple[Any, ...]:
    return (
        instance.id,
        instance.state,
        instance.state_code,
        instance.state_transition_reason,
        tuple(tags.items()),
    )


def _filters(params: Mapping[str, Any]) -> dict[str, list[str]]:
    # moto's own reading of Filters (EC2ResponseBase._filters_from_querystring)
    return {f["Name"]: list(f.get("Values") or []) for f in params.get("Filters") or []}


class InstanceResponses:
    """DescribeInstances bodies for one emulator; call under the emulator's EC2 lock."""

    def __init__(self) -> None:
        # reservation id -> (key of the rendered instances, rendered reservation item)
        self._items: dict[str, tuple[tuple[Any, ...], str]] = {}
        self.rendered_count = 0  # reservation items serialized by moto (tests read it)

    def invalidate(self) -> None:
        """Forget every rendering (something an instance shows may have changed)."""
        self._items.clear()

    def answer(self, backend: Any, params: Mapping[str, Any]) -> bytes | None:
        """The DescribeInstances body for `params` (botocore-parsed), None to let moto answer.

        Raises DescribeError for requests EC2 rejects."""
        if params.get("DryRun"):
            return None
        instance_ids = list(params.get("InstanceIds") or [])
        max_results = params.get("MaxResults")
        if instance_ids and max_results is not None:
            raise DescribeError(
                "InvalidParameterCombination",
                "The parameter instancesSet cannot be used with the parameter maxResults",
            )
        if max_results is not None and not MIN_MAX_RESULTS <= int(max_results) <= MAX_MAX_RESULTS:
            raise DescribeError(
                "InvalidParameterValue",
                f"Value ( {max_results} ) for parameter maxResults is invalid. "
                f"Expecting a value between {MIN_MAX_RESULTS} and {MAX_MAX_RESULTS}.",
            )
        filters = _filters(params)
        try:
            if instance_ids:
                reservations = backend.get_reservations_by_instance_ids(
                    instance_ids, filters=filters or None
                )
            else:
                reservations = backend.describe_instances(filters=filters or None)
        except Exception:  # moto's own error (unknown id, filter): moto answers it the same way
            return None
        page, next_token = self._page(backend, reservations, params.get("NextToken"), max_results)
        return self._body(backend, page, next_token)

    @staticmethod
    def _page(
        backend: Any, reservations: list[Any], token: str | None, max_results: int | None
    ) -> tuple[list[Any], str | None]:
        """One page of `reservations` (in launch order) after `token`, and the next token."""
        if token:
            # moto never forgets a reservation, so launch order positions are stable
            position = {rid: index for index, rid in enumerate(backend.reservations)}
            if token not in position:
                raise DescribeError("InvalidParameterValue", f"Invalid NextToken: {token}")
            after = position[token]
            reservations = [r for r in reservations if position.get(r.id, -1) > after]
        if max_results is None or len(reservations) <= int(max_results):
            return reservations, None
        page = reservations[: int(max_results)]
        return page, str(page[-1].id)

    def _body(self, backend: Any, reservations: Iterable[Any], next_token: str | None) -> bytes:
        tags_by_id: Mapping[str, Mapping[str, str]] = backend.tags
        items: list[str] = []
        for reservation in reservations:
            key = tuple(
                _instance_key(instance, tags_by_id.get(instance.id) or {})
                for instance in reservation.instances
            )
            cached = self._items.get(reservation.id)
            if cached is None or cached[0] != key:
                cached = (key, self._render_item(reservation))
                self._items[reservation.id] = cached
            items.append(cached[1])
        envelope: dict[str, Any] = {"Reservations": []}
        if next_token:
            envelope["NextToken"] = next_token
        body = _render(envelope)
        if items:
            body = body.replace(_EMPTY_SET, _OPEN_SET + "".join(items) + _CLOSE_SET, 1)
        return body.encode()

    def _render_item(self, reservation: Any) -> str:
        body = _render({"Reservations": [reservation]})
        start = body.index(_OPEN_SET) + len(_OPEN_SET)
        end = body.rindex(_CLOSE_SET)
        self.rendered_count += 1
        return body[start:end]
