"""Kubelet settings from Karpenter's kubelet block (quantity strings) into base units."""

from __future__ import annotations

from collections.abc import Mapping

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


def _reserved(values: Mapping[str, str], field: str) -> tuple[int | None, int | None]:
    cpu = memory = None
    for resource, text in values.items():
        where = f"{field}[{resource!r}]"
        try:
            if resource == "cpu":
                cpu = parse_cpu_millis(text)
            elif resource == "memory":
                memory = parse_bytes(text)
            elif resource not in ("ephemeral-storage", "pid"):
                raise KubeletSettingError(where, "only cpu, memory, ephemeral-storage, pid")
        except ValueError as exc:
            if isinstance(exc, KubeletSettingError):
                raise
            raise KubeletSettingError(where, str(exc)) from exc
    return cpu, memory


def _percent(text: str, where: str) -> int:
    if not text.endswith("%"):
        raise KubeletSettingError(where, f"{text!r} must be a percentage such as '10%'")
    try:
        return int(float(text[:-1]))
    except ValueError as exc:
        raise KubeletSettingError(where, f"{text!r} is not a percentage") from exc


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
        where = f"{field}.eviction_hard[{signal!r}]"
        if signal == "memory.available":
            if text.endswith("%"):
                raise KubeletSettingError(where, "give memory.available as a quantity")
            try:
                eviction_memory = parse_bytes(text)
            except ValueError as exc:
                raise KubeletSettingError(where, str(exc)) from exc
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
