"""Kubelet settings from Karpenter's kubelet block (quantity strings) into base units."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Final

from actuator_svc.core.allocatable import (
    DEFAULT_EVICTION_MEMORY_BYTES,
    DEFAULT_EVICTION_NODEFS_PERCENT,
    KubeletSettings,
)
from actuator_svc.core.quantities import parse_bytes, parse_cpu_millis


class KubeletSettingError(ValueError):
    """A kubelet setting is malformed; `field` names it."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


_RESERVABLE: Final = ("cpu", "memory", "ephemeral-storage", "pid")
_PERCENT = re.compile(r"^([0-9]{1,3})(\.[0-9]{1,6})?%$")


def _amount(parse: Callable[[str], int], text: str, where: str) -> int:
    """A non-negative quantity: reserving less than nothing would make allocatable exceed
    capacity."""
    try:
        value = parse(text)
    except ValueError as exc:
        raise KubeletSettingError(where, str(exc)) from exc
    if value < 0:
        raise KubeletSettingError(where, f"{text!r} must not be negative")
    return value


def _reserved(values: Mapping[str, str], field: str) -> tuple[int | None, int | None]:
    cpu = memory = None
    for resource, text in values.items():
        where = f"{field}[{resource[:63]!r}]"
        if resource == "cpu":
            cpu = _amount(parse_cpu_millis, text, where)
        elif resource == "memory":
            memory = _amount(parse_bytes, text, where)
        elif resource not in _RESERVABLE:
            raise KubeletSettingError(where, f"only {', '.join(_RESERVABLE)}")
        else:
            _amount(parse_bytes, text, where)  # not used for allocatable, but must be valid
    return cpu, memory


def _percent(text: str, where: str) -> int:
    match = _PERCENT.match(text)
    if match is None or int(match.group(1)) > 100:
        raise KubeletSettingError(where, f"{text[:64]!r} must be a percentage from 0% to 100%")
    return int(match.group(1))


def kubelet_settings(
    *,
    field: str,
    max_pods: int | None = None,
    pods_per_core: int | None = None,
    system_reserved: Mapping[str, str] | None = None,
    kube_reserved: Mapping[str, str] | None = None,
    eviction_hard: Mapping[str, str] | None = None,
) -> KubeletSettings:
    """KubeletSettings from the request's kubelet block; KubeletSettingError names the field."""
    if max_pods is not None and max_pods <= 0:
        raise KubeletSettingError(f"{field}.max_pods", "must be positive")
    if pods_per_core is not None and pods_per_core < 0:
        raise KubeletSettingError(f"{field}.pods_per_core", "must not be negative")
    sys_cpu, sys_memory = _reserved(system_reserved or {}, f"{field}.system_reserved")
    kube_cpu, kube_memory = _reserved(kube_reserved or {}, f"{field}.kube_reserved")
    eviction_memory = DEFAULT_EVICTION_MEMORY_BYTES
    eviction_nodefs = DEFAULT_EVICTION_NODEFS_PERCENT
    for signal, text in (eviction_hard or {}).items():
        where = f"{field}.eviction_hard[{signal[:63]!r}]"
        if signal == "memory.available":
            if text.endswith("%"):
                raise KubeletSettingError(where, "give memory.available as a quantity")
            eviction_memory = _amount(parse_bytes, text, where)
        elif signal == "nodefs.available":
            eviction_nodefs = _percent(text, where)
    return KubeletSettings(
        max_pods=max_pods,
        pods_per_core=pods_per_core or None,
        kube_reserved_cpu_millis=kube_cpu,
        kube_reserved_memory_bytes=kube_memory,
        system_reserved_cpu_millis=sys_cpu or 0,
        system_reserved_memory_bytes=sys_memory or 0,
        eviction_memory_bytes=eviction_memory,
        eviction_nodefs_percent=eviction_nodefs,
    )
