"""What a watch hands its consumer: a `Synced` snapshot or one `ObjectEvent`.

Kept apart from `scheduler_svc.kube.watch` (which needs aiohttp) so that consumers of events,
the `ClusterMirror` and `daiku plan` feeding it manifests, import no HTTP client.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal

from scheduler_svc.kube.resources import KubeObject, Resource

EventType = Literal["ADDED", "MODIFIED", "DELETED"]


@dataclass(frozen=True, slots=True)
class Synced:
    """Every object of `resource` as of `resource_version`: replace what you held with these."""

    resource: Resource
    objects: tuple[KubeObject, ...]
    resource_version: str


@dataclass(frozen=True, slots=True)
class ObjectEvent:
    """One object added, modified or deleted (for DELETED, its last state)."""

    resource: Resource
    type: EventType
    object: KubeObject


WatchEvent = Synced | ObjectEvent
WatchHandler = Callable[[WatchEvent], None]
Sleep = Callable[[float], Awaitable[None]]
