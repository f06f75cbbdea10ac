"""The informer's relist after 410 and the pure filter functions the scheduler relies on."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from localcloud.kube.controllers.informer import Informer
from localcloud.kube.controllers.pod_fit import (
    QuantityError,
    first_untolerated_taint,
    matches_node_selection,
    pod_requests,
    unschedulable_message,
)
from localcloud.kube.controllers.workloads import pod_template_hash
from localcloud.kube.store import Store
from tests.localcloud.controllers.conftest import pod
from tests.polling import until


async def test_informer_relists_after_falling_behind_and_reports_deletions() -> None:
    """An informer whose watch fell out of the store's window relists and hands its handler a
    DELETED for every object that vanished meanwhile."""
    store = Store(event_window=5)
    for name in ("a", "b", "c"):
        await store.create("pods", pod(name), "default")
    seen: list[tuple[str, str]] = []
    informer = Informer(
        store, "pods", lambda kind, obj, _: seen.append((kind, obj["metadata"]["name"]))
    )
    informer.start()  # listed, but not yet watching
    await store.delete("pods", "a", "default")
    for index in range(20):
        await store.create("pods", pod(f"new{index}"), "default")
    task = asyncio.create_task(informer.run())
    try:
        await until(lambda: _has(seen, ("DELETED", "a")))
        assert set(informer.cache) == {
            ("default", n) for n in ["b", "c"] + [f"new{i}" for i in range(20)]
        }
        assert ("ADDED", "new19") in seen
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


async def _has(seen: list[tuple[str, str]], item: tuple[str, str]) -> bool:
    return item in seen


def test_tolerations_match_key_value_and_effect() -> None:
    """Exists tolerates any value, Equal needs the value, an empty effect covers every effect,
    and PreferNoSchedule taints never filter."""
    taints = [
        {"key": "soft", "effect": "PreferNoSchedule"},
        {"key": "team", "value": "a", "effect": "NoSchedule"},
        {"key": "gpu", "value": "true", "effect": "NoExecute"},
    ]
    assert first_untolerated_taint(taints, [{"key": "team", "operator": "Exists"}]) == taints[2]
    assert (
        first_untolerated_taint(
            taints, [{"key": "team", "value": "b"}, {"operator": "Exists", "effect": "NoExecute"}]
        )
        == taints[1]
    )
    assert first_untolerated_taint(taints, [{"operator": "Exists"}]) is None


def test_node_affinity_operators_and_fields() -> None:
    """Required node affinity ORs its terms and ANDs expressions, with Gt/Lt on integers and
    matchFields on the node name; nodeSelector must match too."""

    def with_terms(*terms: Any, selector: dict[str, str] | None = None) -> Any:
        spec: dict[str, Any] = {
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": list(terms)
                    }
                }
            }
        }
        if selector:
            spec["nodeSelector"] = selector
        return {"spec": spec}

    labels = {"cpu": "8", "zone": "a"}
    big = {"matchExpressions": [{"key": "cpu", "operator": "Gt", "values": ["4"]}]}
    named = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}
    absent = {"matchExpressions": [{"key": "gpu", "operator": "DoesNotExist"}]}
    assert matches_node_selection(with_terms(big), labels, "n2")
    assert not matches_node_selection(with_terms(named), labels, "n2")
    assert matches_node_selection(with_terms(named, absent), labels, "n2")
    assert not matches_node_selection(with_terms(big, selector={"zone": "b"}), labels, "n2")
    assert not matches_node_selection(with_terms({}), labels, "n2")


def test_pod_requests_sum_containers_and_cover_init_containers() -> None:
    """Requests add up over containers, an init container raises them to its own, plus a slot."""
    spec_pod = pod("p", cpu="250m", memory="1Gi")
    spec_pod["spec"]["containers"].append(
        {"name": "side", "image": "x", "resources": {"requests": {"cpu": "250m"}}}
    )
    spec_pod["spec"]["initContainers"] = [
        {"name": "init", "image": "x", "resources": {"requests": {"cpu": "2", "memory": "1Mi"}}}
    ]
    assert pod_requests(spec_pod) == {"cpu": 2000, "memory": 1024**3, "pods": 1}
    with pytest.raises(QuantityError, match="cpu"):
        pod_requests(pod("bad", cpu="two"))


def test_unschedulable_message_format() -> None:
    """The message counts reasons, sorts them as strings and ends with a period."""
    assert (
        unschedulable_message(3, {"Insufficient memory": 1, "Insufficient cpu": 2})
        == "0/3 nodes are available: 1 Insufficient memory, 2 Insufficient cpu."
    )
    assert unschedulable_message(0, {}) == "no nodes available to schedule pods"


def test_pod_template_hash_is_stable_and_spelled_safely() -> None:
    """The hash depends only on the template and uses kube's consonant-and-digit alphabet."""
    template = {"metadata": {"labels": {"app": "a"}}, "spec": {"containers": [{"name": "c"}]}}
    first = pod_template_hash(template)
    assert first == pod_template_hash({**template})
    assert first != pod_template_hash({**template, "spec": {"containers": [{"name": "d"}]}})
    assert set(first) <= set("bcdfghjklmnpqrstvwxz2456789")
