"""HorizontalPodAutoscalers: autoscaling/v2 is stored, autoscaling/v1 (what `kubectl
autoscale` writes) is served from it, and the apiserver's defaults for v2.

v1's targetCPUUtilizationPercentage is v2's cpu Utilization metric, and its
currentCPUUtilizationPercentage the matching current metric. Unlike kube-apiserver, the v2
metrics v1 cannot express are dropped when read through v1, not kept in annotations.
"""

from __future__ import annotations

from typing import Any, Final

JsonObject = dict[str, Any]
DEFAULT_CPU_UTILIZATION: Final = 80


def _cpu_metric(kind: str, utilization: int) -> JsonObject:
    value = {"averageUtilization": utilization}
    body = {"target": {"type": "Utilization", **value}} if kind == "target" else {"current": value}
    return {"type": "Resource", "resource": {"name": "cpu", **body}}


def _cpu_utilization(metrics: list[JsonObject], kind: str) -> int | None:
    for metric in metrics:
        resource = metric.get("resource") or {}
        if metric.get("type") == "Resource" and resource.get("name") == "cpu":
            value = (resource.get(kind) or {}).get("averageUtilization")
            if value is not None:
                return int(value)
    return None


def default_hpa_v2(hpa: JsonObject) -> None:
    """minReplicas 1, and cpu at 80 % utilization when no metric is given."""
    spec = hpa.setdefault("spec", {})
    spec.setdefault("minReplicas", 1)
    if not spec.get("metrics"):
        spec["metrics"] = [_cpu_metric("target", DEFAULT_CPU_UTILIZATION)]


def hpa_v1_to_v2(hpa: JsonObject) -> JsonObject:
    out = {**hpa, "apiVersion": "autoscaling/v2"}
    if "spec" in hpa:
        spec = dict(hpa["spec"] or {})
        target = spec.pop("targetCPUUtilizationPercentage", None)
        if target is not None:
            spec["metrics"] = [_cpu_metric("target", int(target))]
        out["spec"] = spec
    if "status" in hpa:
        status = dict(hpa["status"] or {})
        current = status.pop("currentCPUUtilizationPercentage", None)
        if current is not None:
            status["currentMetrics"] = [_cpu_metric("current", int(current))]
        out["status"] = status
    return out


def hpa_v2_to_v1(hpa: JsonObject) -> JsonObject:
    out = {**hpa, "apiVersion": "autoscaling/v1"}
    if "spec" in hpa:
        spec = {k: v for k, v in (hpa["spec"] or {}).items() if k not in ("metrics", "behavior")}
        target = _cpu_utilization((hpa["spec"] or {}).get("metrics") or [], "target")
        if target is not None:
            spec["targetCPUUtilizationPercentage"] = target
        out["spec"] = spec
    if "status" in hpa:
        status = {
            k: v
            for k, v in (hpa["status"] or {}).items()
            if k not in ("currentMetrics", "conditions")
        }
        current = _cpu_utilization((hpa["status"] or {}).get("currentMetrics") or [], "current")
        if current is not None:
            status["currentCPUUtilizationPercentage"] = current
        out["status"] = status
    return out
