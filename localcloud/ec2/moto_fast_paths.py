"""Fast paths for the moto lookups that grow quadratically with the number of instances.

moto looks up a resource's tags (`TaggedEC2Resource.get_tags`, used when rendering every
instance and when evaluating every `tag:` filter) through `TagBackend.describe_tags` with a
`resource-id` filter, which compiles a regular expression and scans every tag of every resource
in the region. With an instance and a volume per node and six tags each, DescribeInstances over
1,000 instances then walks 12,000 tags 1,000 times (seconds per call, all under the EC2 lock).

Likewise DescribeInstances with a `tag:KEY` filter (the actuator finds a claim's instance by its
`daiku.dev/nodeclaim` tag before every launch) copies every reservation and evaluates the filter
on each instance, compiling the filter's values to regular expressions each time.

`install()` adds two fast paths, each answering exactly what moto would:
- `describe_tags` of exactly one literal resource id is read from moto's own tag dictionary
  (the same list of dicts, in the same order);
- `all_reservations(filters)` with `tag:KEY` or `tag-key` filters of literal values first keeps
  the reservations with an instance whose tags satisfy them (dictionary look-ups per instance),
  then lets moto filter those as before.
Every other call goes to moto unchanged. It is idempotent and process-wide, like moto's backends.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

# Characters that make a DescribeTags filter value a pattern (moto's simple_aws_filter_to_re).
_PATTERN_CHARACTERS: Final = frozenset("*?[\\")


class _Installed:
    """Whether `install()` ran in this process (moto's classes are process-wide)."""

    lock = threading.Lock()
    done = False


def _literal_resource_id(filters: Any) -> str | None:
    """The resource id when `filters` asks for exactly one literal id and nothing else."""
    if not isinstance(filters, dict) or list(filters) != ["resource-id"]:
        return None
    values = filters["resource-id"]
    if not isinstance(values, list) or len(values) != 1 or not isinstance(values[0], str):
        return None
    resource_id: str = values[0]
    if not resource_id or _PATTERN_CHARACTERS.intersection(resource_id):
        return None
    return resource_id


@dataclass(frozen=True)
class _TagCondition:
    """A literal tag filter: KEY's value is one of `values` (`tag:KEY`), or, with no key, one
    of `values` is a key of the tags (`tag-key`)."""

    key: str | None
    values: frozenset[str]

    def holds(self, tags: Mapping[str, str]) -> bool:
        if self.key is None:
            return any(value in tags for value in self.values)
        return tags.get(self.key) in self.values


def _literal_tag_conditions(filters: Any) -> list[_TagCondition]:
    """The `tag:KEY` and `tag-key` filters whose values are all literal, as conditions."""
    if not isinstance(filters, dict):
        return []
    found: list[_TagCondition] = []
    for name, values in filters.items():
        if not isinstance(name, str) or not isinstance(values, list) or not values:
            continue
        if not all(isinstance(v, str) and not _PATTERN_CHARACTERS.intersection(v) for v in values):
            continue
        if name.startswith("tag:"):
            found.append(_TagCondition(name[4:], frozenset(values)))
        elif name == "tag-key":
            found.append(_TagCondition(None, frozenset(values)))
    return found


def install() -> None:
    """Install the fast paths into moto's EC2 backend classes (once per process)."""
    from moto.ec2.models.instances import InstanceBackend
    from moto.ec2.models.tags import TagBackend
    from moto.ec2.utils import EC2_PREFIX_TO_RESOURCE, filter_reservations, get_prefix

    with _Installed.lock:
        if _Installed.done:
            return
        _Installed.done = True
        original: Callable[..., list[dict[str, str]]] = TagBackend.describe_tags

        def describe_tags(
            self: TagBackend, filters: dict[str, list[str]] | None = None
        ) -> list[dict[str, str]]:
            resource_id = _literal_resource_id(filters)
            if resource_id is None:
                return original(self, filters)
            # .get, not [..]: self.tags is a defaultdict and a lookup must not add an entry
            tags = self.tags.get(resource_id)
            if not tags:
                return []
            resource_type = EC2_PREFIX_TO_RESOURCE.get(get_prefix(resource_id), "")
            return [
                {
                    "resource_id": resource_id,
                    "key": key,
                    "value": value,
                    "resource_type": resource_type,
                }
                for key, value in list(tags.items())
            ]

        TagBackend.describe_tags = describe_tags  # type: ignore[method-assign]

        original_all_reservations: Callable[..., list[Any]] = InstanceBackend.all_reservations

        def all_reservations(self: InstanceBackend, filters: Any = None) -> list[Any]:
            conditions = _literal_tag_conditions(filters)
            if not conditions:
                return original_all_reservations(self, filters)
            tags_by_id: dict[str, dict[str, str]] = self.tags  # type: ignore[attr-defined]
            kept = [
                copy.copy(reservation)
                for reservation in list(self.reservations.values())
                if any(
                    all(c.holds(tags_by_id.get(instance.id) or {}) for c in conditions)
                    for instance in reservation.instances
                )
            ]
            return filter_reservations(kept, filters)

        InstanceBackend.all_reservations = all_reservations  # type: ignore[method-assign]
