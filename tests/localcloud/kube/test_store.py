"""The in-process store: the semantics the HTTP API and the controllers both rely on."""

import asyncio
from typing import Any

import pytest

from localcloud.kube.errors import (
    AlreadyExists,
    BadRequest,
    Conflict,
    Gone,
    Invalid,
    NotFound,
    Timeout,
    TooManyRequests,
    UnsupportedMediaType,
)
from localcloud.kube.store import ObjectList, Store


def pod(name: str, labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"containers": [{"name": "app", "image": "nginx"}], **spec},
    }


def deployment(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": []}},
        },
    }


CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {
        "group": "example.com",
        "scope": "Cluster",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
        "versions": [
            {"name": "v1", "served": True, "storage": True, "subresources": {"status": {}}}
        ],
    },
}


async def test_create_fills_server_fields_and_rejects_duplicates() -> None:
    """Create assigns uid, timestamp, resourceVersion and a generated name; a second create of
    the same name is AlreadyExists."""
    store = Store()
    created = await store.create(
        "pods", {**pod(""), "metadata": {"generateName": "web-"}}, "default"
    )
    meta = created["metadata"]
    assert meta["name"].startswith("web-")
    assert len(meta["name"]) == 9
    assert meta["uid"]
    assert meta["creationTimestamp"].endswith("Z")
    assert int(meta["resourceVersion"]) == store.resource_version
    assert created["status"]["phase"] == "Pending"
    with pytest.raises(AlreadyExists):
        await store.create("pods", {**created, "metadata": {"name": meta["name"]}}, "default")


async def test_create_in_missing_namespace_and_bad_name_fail() -> None:
    """A namespaced create needs an existing namespace and a DNS-1123 name."""
    store = Store()
    with pytest.raises(NotFound, match='namespaces "nope" not found'):
        await store.create("pods", pod("a"), "nope")
    with pytest.raises(Invalid, match=r"metadata\.name"):
        await store.create("pods", pod("Bad_Name"), "default")


async def test_resource_versions_increase_globally() -> None:
    """Every write across resources takes the next global resourceVersion."""
    store = Store()
    first = await store.create("pods", pod("a"), "default")
    second = await store.create("nodes", {"metadata": {"name": "n1"}})
    assert (
        int(second["metadata"]["resourceVersion"]) == int(first["metadata"]["resourceVersion"]) + 1
    )
    listed = await store.list("pods", "default")
    assert listed.resource_version == store.resource_version


async def test_update_with_stale_resource_version_conflicts() -> None:
    """An update carrying an old resourceVersion is a 409 Conflict; a fresh one succeeds."""
    store = Store()
    created = await store.create("pods", pod("a"), "default")
    created["metadata"]["labels"] = {"v": "1"}
    updated = await store.update("pods", created, "default")
    created["metadata"]["labels"] = {"v": "2"}
    with pytest.raises(Conflict, match="the object has been modified"):
        await store.update("pods", created, "default")
    assert updated["metadata"]["labels"] == {"v": "1"}


async def test_generation_bumps_on_spec_change_only() -> None:
    """metadata.generation grows when the spec changes, not on label or status changes."""
    store = Store()
    created = await store.create("deployments", deployment("web"), "default")
    assert created["metadata"]["generation"] == 1
    created["metadata"]["labels"] = {"x": "y"}
    relabelled = await store.update("deployments", created, "default")
    assert relabelled["metadata"]["generation"] == 1
    relabelled["spec"]["replicas"] = 5
    scaled = await store.update("deployments", relabelled, "default")
    assert scaled["metadata"]["generation"] == 2


async def test_noop_update_writes_nothing() -> None:
    """An update that changes nothing keeps the resourceVersion and emits no event."""
    store = Store()
    created = await store.create("pods", pod("a"), "default")
    before = store.resource_version
    again = await store.update("pods", created, "default")
    assert again["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    assert store.resource_version == before


async def test_status_subresource_isolation() -> None:
    """The main endpoint ignores status; /status ignores spec and labels."""
    store = Store()
    created = await store.create("pods", pod("a"), "default")
    created["status"] = {"phase": "Running"}
    created["spec"]["containers"][0]["image"] = "nginx:2"
    main = await store.update("pods", created, "default")
    assert main["status"]["phase"] == "Pending"
    assert main["spec"]["containers"][0]["image"] == "nginx:2"
    main["status"] = {"phase": "Running"}
    main["spec"]["containers"][0]["image"] = "nginx:3"
    main["metadata"]["labels"] = {"changed": "yes"}
    status = await store.update("pods", main, "default", subresource="status")
    assert status["status"] == {"phase": "Running"}
    assert status["spec"]["containers"][0]["image"] == "nginx:2"
    assert status["metadata"]["labels"] == {}


async def test_immutable_fields_are_refused() -> None:
    """Pod specs change only in image/tolerations/deadlines; workload selectors never; a
    create carrying a resourceVersion is refused."""
    store = Store()
    created = await store.create("pods", pod("a"), "default")
    created["spec"]["nodeName"] = "n1"
    with pytest.raises(Invalid, match="pod updates may not change fields"):
        await store.update("pods", created, "default")
    await store.create("deployments", deployment("web"), "default")
    with pytest.raises(Invalid, match="field is immutable"):
        await store.patch(
            "deployments",
            "web",
            {"spec": {"selector": {"matchLabels": {"app": "other"}}}},
            namespace="default",
        )
    with pytest.raises(BadRequest, match="resourceVersion should not be set"):
        await store.create(
            "pods", {**pod("b"), "metadata": {"name": "b", "resourceVersion": "7"}}, "default"
        )


async def test_patch_types() -> None:
    """Merge, JSON and strategic patches apply; strategic is refused on custom resources."""
    store = Store()
    await store.create("pods", pod("a", {"app": "web"}), "default")
    merged = await store.patch(
        "pods", "a", {"metadata": {"labels": {"tier": "x"}}}, "merge", namespace="default"
    )
    assert merged["metadata"]["labels"] == {"app": "web", "tier": "x"}
    jsoned = await store.patch(
        "pods", "a", [{"op": "remove", "path": "/metadata/labels/app"}], "json", namespace="default"
    )
    assert jsoned["metadata"]["labels"] == {"tier": "x"}
    strategic = await store.patch(
        "pods",
        "a",
        {"spec": {"containers": [{"name": "app", "image": "nginx:2"}]}},
        "strategic",
        namespace="default",
    )
    assert strategic["spec"]["containers"][0]["image"] == "nginx:2"
    assert strategic["spec"]["containers"][0]["terminationMessagePath"] == "/dev/termination-log"
    await store.create("customresourcedefinitions", CRD)
    await store.create("widgets.example.com", {"metadata": {"name": "w"}, "spec": {"size": 1}})
    with pytest.raises(UnsupportedMediaType):
        await store.patch("widgets", "w", {"spec": {"size": 2}}, "strategic")


async def test_patch_with_stale_resource_version_conflicts() -> None:
    """A patch carrying metadata.resourceVersion is a precondition."""
    store = Store()
    created = await store.create("pods", pod("a"), "default")
    await store.patch("pods", "a", {"metadata": {"labels": {"a": "1"}}}, namespace="default")
    with pytest.raises(Conflict):
        await store.patch(
            "pods",
            "a",
            {
                "metadata": {
                    "resourceVersion": created["metadata"]["resourceVersion"],
                    "labels": {"a": "2"},
                }
            },
            namespace="default",
        )


async def test_finalizers_hold_deletion_until_removed() -> None:
    """A delete of an object with finalizers sets deletionTimestamp; removing them removes it."""
    store = Store()
    await store.create(
        "nodes", {"metadata": {"name": "n1", "finalizers": ["daiku.dev/termination"]}}
    )
    deleting = await store.delete("nodes", "n1")
    assert deleting["metadata"]["deletionTimestamp"]
    assert (await store.get("nodes", "n1"))["metadata"]["deletionTimestamp"]
    await store.patch("nodes", "n1", {"metadata": {"finalizers": None}})
    with pytest.raises(NotFound):
        await store.get("nodes", "n1")


async def test_bound_pod_is_deleted_gracefully() -> None:
    """A pod on a node gets a deletionTimestamp and stays until deleted with grace 0;
    an unbound pod goes at once."""
    store = Store()
    await store.create("pods", pod("bound", nodeName="n1"), "default")
    await store.create("pods", pod("pending"), "default")
    graceful = await store.delete("pods", "bound", "default")
    assert graceful["metadata"]["deletionGracePeriodSeconds"] == 30
    await store.get("pods", "bound", "default")
    await store.delete("pods", "bound", "default", grace_period_seconds=0)
    await store.delete("pods", "pending", "default")
    assert (await store.list("pods", "default")).items == []


async def test_owner_deletion_collects_dependents_in_background() -> None:
    """Deleting an owner deletes dependents whose owners are all gone; Orphan keeps them."""
    store = Store()
    rs = await store.create("replicasets", deployment("rs"), "default")
    ref = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "name": "rs",
        "uid": rs["metadata"]["uid"],
    }
    for name in ("p1", "p2"):
        body = pod(name)
        body["metadata"]["ownerReferences"] = [ref]
        await store.create("pods", body, "default")
    await store.delete("replicasets", "rs", "default", propagation_policy="Background")
    assert (await store.list("pods", "default")).items == []

    rs = await store.create("replicasets", deployment("rs2"), "default")
    body = pod("kept")
    body["metadata"]["ownerReferences"] = [{**ref, "name": "rs2", "uid": rs["metadata"]["uid"]}]
    await store.create("pods", body, "default")
    await store.delete("replicasets", "rs2", "default", propagation_policy="Orphan")
    kept = await store.get("pods", "kept", "default")
    assert "ownerReferences" not in kept["metadata"]


async def test_foreground_deletion_waits_for_dependents() -> None:
    """With Foreground, the owner stays (foregroundDeletion finalizer) until dependents go."""
    store = Store()
    rs = await store.create("replicasets", deployment("rs"), "default")
    body = pod("p", nodeName="n1")
    body["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": rs["metadata"]["uid"]}
    ]
    await store.create("pods", body, "default")
    owner = await store.delete("replicasets", "rs", "default", propagation_policy="Foreground")
    assert owner["metadata"]["finalizers"] == ["foregroundDeletion"]
    assert (await store.get("pods", "p", "default"))["metadata"]["deletionTimestamp"]
    await store.delete("pods", "p", "default", grace_period_seconds=0)
    with pytest.raises(NotFound):
        await store.get("replicasets", "rs", "default")


async def test_namespace_deletion_removes_its_contents() -> None:
    """A deleted namespace is Terminating until everything in it is gone."""
    store = Store()
    await store.create("namespaces", {"metadata": {"name": "team"}})
    await store.create("pods", pod("p", nodeName="n1"), "team")
    terminating = await store.delete("namespaces", "team")
    assert terminating["status"]["phase"] == "Terminating"
    await store.delete("pods", "p", "team", grace_period_seconds=0)
    with pytest.raises(NotFound):
        await store.get("namespaces", "team")


async def test_list_with_selectors() -> None:
    """list filters by namespace, label selector and field selector."""
    store = Store()
    await store.create("pods", pod("a", {"app": "web"}, nodeName="n1"), "default")
    await store.create("pods", pod("b", {"app": "db"}, nodeName="n2"), "default")
    await store.create("pods", pod("c", {"app": "web"}), "kube-system")

    def names(result: ObjectList) -> list[str]:
        return [o["metadata"]["name"] for o in result.items]

    assert names(await store.list("pods", label_selector="app=web")) == ["a", "c"]
    assert names(await store.list("pods", "default", label_selector="app in (web,db)")) == [
        "a",
        "b",
    ]
    assert names(await store.list("pods", field_selector="spec.nodeName=n2")) == ["b"]
    assert names(
        await store.list("pods", field_selector="spec.nodeName=,metadata.namespace=kube-system")
    ) == ["c"]


async def test_watch_replays_changes_after_a_resource_version() -> None:
    """A watch from a list's resourceVersion yields exactly the later changes, in order."""
    store = Store()
    await store.create("pods", pod("a"), "default")
    listed = await store.list("pods")
    await store.patch("pods", "a", {"metadata": {"labels": {"x": "1"}}}, namespace="default")
    await store.create("pods", pod("b"), "default")
    await store.delete("pods", "a", "default")
    watcher = store.watch("pods", since_rv=listed.resource_version)
    events = await watcher.poll(1.0)
    assert [(t, o["metadata"]["name"]) for t, o in events] == [
        ("MODIFIED", "a"),
        ("ADDED", "b"),
        ("DELETED", "a"),
    ]
    assert events[-1].resource_version == store.resource_version


async def test_watch_without_version_starts_with_current_objects_then_streams() -> None:
    """A watch with no resourceVersion yields ADDED for existing objects, then live changes."""
    store = Store()
    await store.create("nodes", {"metadata": {"name": "n1"}})
    seen: list[tuple[str, str]] = []

    async def consume() -> None:
        async for kind, obj in store.watch("nodes"):
            seen.append((kind, obj["metadata"]["name"]))
            if len(seen) == 2:
                return

    task = asyncio.create_task(consume())
    await asyncio.sleep(0)
    await store.create("nodes", {"metadata": {"name": "n2"}})
    await asyncio.wait_for(task, 5)
    assert seen == [("ADDED", "n1"), ("ADDED", "n2")]


async def test_watch_from_compacted_version_is_gone() -> None:
    """After the window drops events, a watch from before them fails with 410 Gone."""
    store = Store(event_window=5)
    start = store.resource_version
    for i in range(20):
        await store.create("nodes", {"metadata": {"name": f"n{i}"}})
    with pytest.raises(Gone, match="too old resource version"):
        store.watch("nodes", since_rv=start)
    recent = store.resource_version - 2
    assert len(await store.watch("nodes", since_rv=recent).poll(1)) == 2
    store.compact()
    with pytest.raises(Gone):
        store.watch("nodes", since_rv=recent)


async def test_lagging_watcher_gets_gone() -> None:
    """A watcher whose position falls out of the window gets Gone on its next read."""
    store = Store(event_window=3)
    watcher = store.watch("nodes", since_rv=store.resource_version)
    for i in range(10):
        await store.create("nodes", {"metadata": {"name": f"n{i}"}})
    with pytest.raises(Gone):
        await watcher.poll(1)


async def test_watch_with_selector_sees_objects_enter_and_leave() -> None:
    """With a selector, an object that starts matching is ADDED and one that stops is DELETED."""
    store = Store()
    await store.create("pods", pod("a"), "default")
    watcher = store.watch(
        "pods", "default", since_rv=store.resource_version, field_selector="spec.nodeName=n1"
    )
    await store.bind("default", "a", "n1")
    await store.patch(
        "pods", "a", {"status": {"phase": "Failed"}}, namespace="default", subresource="status"
    )
    await store.delete("pods", "a", "default")
    events = await watcher.poll(1)
    assert [t for t, _ in events] == ["ADDED", "MODIFIED", "DELETED"]
    assert await watcher.poll(0.01) == []


async def test_crd_registers_a_served_resource_with_status() -> None:
    """Creating a CRD serves its resource (cluster-scoped, status subresource); deleting it
    removes the type and its objects."""
    store = Store()
    crd = await store.create("customresourcedefinitions", CRD)
    assert {c["type"] for c in crd["status"]["conditions"]} == {"Established", "NamesAccepted"}
    created = await store.create(
        "example.com/v1/widgets",
        {"metadata": {"name": "w"}, "spec": {"size": 1}, "status": {"x": 1}},
    )
    assert "status" not in created
    assert created["apiVersion"] == "example.com/v1"
    created["status"] = {"ready": True}
    updated = await store.update("widgets", created, subresource="status")
    assert updated["status"] == {"ready": True}
    assert updated["metadata"]["generation"] == 1
    await store.delete("customresourcedefinitions", "widgets.example.com")
    with pytest.raises(NotFound):
        store.resource("widgets")


async def test_eviction_honours_pod_disruption_budget() -> None:
    """Eviction deletes a pod while the budget allows and is TooManyRequests when it would
    violate it."""
    store = Store()
    ready = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    for name in ("a", "b"):
        await store.create("pods", pod(name, {"app": "web"}, nodeName="n1"), "default")
        await store.patch(
            "pods", name, {"status": ready}, namespace="default", subresource="status"
        )
    await store.create(
        "poddisruptionbudgets",
        {
            "metadata": {"name": "web"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}},
        },
        "default",
    )
    evicted = await store.evict("default", "a")
    assert evicted["metadata"]["deletionTimestamp"]
    with pytest.raises(TooManyRequests) as blocked:
        await store.evict("default", "b")
    assert blocked.value.to_status()["details"]["causes"][0]["reason"] == "DisruptionBudget"


async def _pods_and_budget(store: Store, ready: dict[str, bool], **spec: Any) -> None:
    for name, is_ready in ready.items():
        status = {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True" if is_ready else "False"}],
        }
        await store.create("pods", pod(name, {"app": "web"}, nodeName="n1"), "default")
        await store.patch(
            "pods", name, {"status": status}, namespace="default", subresource="status"
        )
    await store.create(
        "poddisruptionbudgets",
        {
            "metadata": {"name": "web"},
            "spec": {"selector": {"matchLabels": {"app": "web"}}, **spec},
        },
        "default",
    )


async def test_a_not_ready_pod_of_a_healthy_budget_may_be_evicted() -> None:
    """IfHealthyBudget (the default unhealthyPodEvictionPolicy): with the healthy pods the
    budget desires (2 of minAvailable 2), a not-ready pod goes although no disruption is
    allowed; a ready one still does not."""
    store = Store()
    await _pods_and_budget(store, {"a": True, "b": True, "sick": False}, minAvailable=2)

    assert (await store.evict("default", "sick"))["metadata"]["deletionTimestamp"]
    with pytest.raises(TooManyRequests):
        await store.evict("default", "a")


@pytest.mark.parametrize(("policy", "evicted"), [("IfHealthyBudget", False), ("AlwaysAllow", True)])
async def test_a_not_ready_pod_of_an_unhealthy_budget_goes_only_when_always_allowed(
    policy: str, evicted: bool
) -> None:
    store = Store()
    await _pods_and_budget(
        store, {"a": True, "sick": False}, minAvailable=2, unhealthyPodEvictionPolicy=policy
    )

    if evicted:
        assert (await store.evict("default", "sick"))["metadata"]["deletionTimestamp"]
    else:
        with pytest.raises(TooManyRequests):
            await store.evict("default", "sick")


async def test_bind_and_scale() -> None:
    """Binding sets nodeName once (second bind conflicts); scale reads and writes replicas."""
    store = Store()
    await store.create("pods", pod("a"), "default")
    bound = await store.bind("default", "a", "n1")
    assert bound["spec"]["nodeName"] == "n1"
    with pytest.raises(Conflict):
        await store.bind("default", "a", "n2")
    await store.create("deployments", deployment("web"), "default")
    scale = await store.set_scale("deployments", "web", 7, "default")
    assert scale["spec"]["replicas"] == 7
    assert scale["status"]["selector"] == "app=web"
    assert (await store.get("deployments.apps", "web", "default"))["spec"]["replicas"] == 7


async def test_pod_disruption_budget_status_follows_pods() -> None:
    """A PodDisruptionBudget's status counts healthy pods and the disruptions they allow."""
    store = Store()
    await store.create(
        "poddisruptionbudgets",
        {
            "metadata": {"name": "web"},
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "web"}}},
        },
        "default",
    )
    ready = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    for name in ("a", "b", "c"):
        await store.create("pods", pod(name, {"app": "web"}, nodeName="n1"), "default")
        await store.patch(
            "pods", name, {"status": ready}, namespace="default", subresource="status"
        )
    await asyncio.sleep(0)  # the refresh runs on the next loop iteration, like a controller
    status = (await store.get("poddisruptionbudgets", "web", "default"))["status"]
    assert (status["expectedPods"], status["currentHealthy"], status["desiredHealthy"]) == (3, 3, 2)
    assert status["disruptionsAllowed"] == 1
    await store.delete("pods", "a", "default")
    await asyncio.sleep(0)
    status = (await store.get("poddisruptionbudgets", "web", "default"))["status"]
    assert status["disruptionsAllowed"] == 0
    assert status["conditions"][0]["reason"] == "InsufficientPods"


async def test_dry_run_stores_nothing() -> None:
    """Inside dry_run(), a create returns the defaulted object but nothing is stored."""
    store = Store()
    before = store.resource_version
    with store.dry_run():
        shown = await store.create("pods", pod("a"), "default")
    assert shown["status"]["phase"] == "Pending"
    assert store.resource_version == before
    with pytest.raises(NotFound):
        await store.get("pods", "a", "default")


async def test_events_are_one_resource_served_by_two_apis() -> None:
    """An events.k8s.io/v1 Event is readable as a core/v1 Event (and back), fields converted."""
    store = Store()
    await store.create(
        "events.k8s.io/v1/events",
        {
            "metadata": {"name": "e1"},
            "regarding": {"kind": "Node", "name": "n1"},
            "reason": "Launched",
            "note": "launched i-1",
            "type": "Normal",
            "action": "Launch",
            "reportingController": "daiku.dev/actuator",
            "reportingInstance": "a-1",
            "eventTime": "2026-01-01T00:00:00.000000Z",
        },
        "default",
    )
    core = await store.list("v1/events", field_selector="involvedObject.name=n1")
    assert [(e["message"], e["reason"], e["apiVersion"]) for e in core.items] == [
        ("launched i-1", "Launched", "v1")
    ]
    again = await store.get("events.k8s.io/v1/events", "e1", "default")
    assert (again["note"], again["regarding"]["name"]) == ("launched i-1", "n1")
    watcher = store.watch("events.k8s.io/v1/events", since_rv=store.resource_version)
    await store.patch("events.k8s.io/v1/events", "e1", {"note": "again"}, namespace="default")
    ((kind, event),) = await watcher.poll(1)
    assert (kind, event["note"], event["apiVersion"]) == ("MODIFIED", "again", "events.k8s.io/v1")


async def test_an_events_v1_event_without_its_required_fields_is_invalid() -> None:
    """events.k8s.io/v1 requires eventTime, a Normal/Warning type, reportingController,
    reportingInstance, action and reason (ValidateEventCreate); each missing one is a cause."""
    store = Store()

    with pytest.raises(Invalid) as refused:
        await store.create(
            "events.k8s.io/v1/events",
            {"metadata": {"name": "e1"}, "type": "Info", "note": "x" * 1025},
            "default",
        )

    causes = {c["field"] for c in refused.value.to_status()["details"]["causes"]}
    assert causes == {
        "eventTime",
        "type",
        "reportingController",
        "reportingInstance",
        "action",
        "reason",
        "note",
    }
    assert (await store.list("v1/events", "default")).items == []


async def test_unsupported_field_selector_labels_are_bad_requests() -> None:
    """Only the field labels the real apiserver supports per resource are accepted."""
    store = Store()
    assert (await store.list("nodes", field_selector="spec.unschedulable=true")).items == []
    with pytest.raises(BadRequest, match=r"field label not supported: spec\.providerID"):
        await store.list("nodes", field_selector="spec.providerID=aws:///x")
    with pytest.raises(BadRequest):
        store.watch("pods", field_selector="spec.containers=x")


async def test_generation_of_custom_resources_without_status_subresource() -> None:
    """Without a status subresource, status is part of what generation tracks."""
    store = Store()
    crd = {**CRD, "metadata": {"name": "plain.example.com"}}
    crd["spec"] = {
        **CRD["spec"],
        "names": {"plural": "plain", "singular": "plain", "kind": "Plain"},
        "versions": [{"name": "v1", "served": True, "storage": True}],
    }
    await store.create("customresourcedefinitions", crd)
    created = await store.create(
        "plain.example.com", {"metadata": {"name": "p"}, "status": {"x": 1}}
    )
    assert created["status"] == {"x": 1}
    created["status"] = {"x": 2}
    assert (await store.update("plain", created))["metadata"]["generation"] == 2


async def test_watch_from_a_version_never_reached_is_an_error() -> None:
    """A resourceVersion beyond the store's (a client from before a restart) is a 504
    ResourceVersionTooLarge, not a silent wait."""
    store = Store()
    with pytest.raises(Timeout) as too_large:
        store.watch("pods", since_rv=store.resource_version + 1000)
    assert (
        too_large.value.to_status()["details"]["causes"][0]["reason"] == "ResourceVersionTooLarge"
    )


async def test_dependents_of_missing_owners_are_collected() -> None:
    """An object whose owner references all point at missing objects is garbage collected."""
    store = Store()
    body = pod("orphan")
    body["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds", "uid": "no-such-uid"}
    ]
    await store.create("pods", body, "default")
    await asyncio.sleep(0)  # the collector runs on the next loop iteration
    with pytest.raises(NotFound):
        await store.get("pods", "orphan", "default")
    body["metadata"]["ownerReferences"] = [{"kind": "DaemonSet", "name": "ds"}]
    with pytest.raises(Invalid, match=r"ownerReferences\[0\]\.apiVersion: Required"):
        await store.create("pods", body, "default")


async def test_a_deployment_strategy_keeps_the_given_rolling_update_and_defaults_the_rest() -> None:
    """apps/v1 defaulting fills what is unset (type, each rollingUpdate field) and keeps what a
    manifest sets: `rollingUpdate: {maxSurge: 1}` stays 1, maxUnavailable becomes 25 %."""
    store = Store()
    created = await store.create(
        "deployments",
        {
            "metadata": {"name": "web"},
            "spec": {
                "selector": {"matchLabels": {"app": "web"}},
                "strategy": {"rollingUpdate": {"maxSurge": 1}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "a", "image": "x"}]},
                },
            },
        },
        "default",
    )

    assert created["spec"]["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 1, "maxUnavailable": "25%"},
    }
