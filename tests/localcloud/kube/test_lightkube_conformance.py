"""Conformance through lightkube (issue 16): a client written from the API conventions, not
generated from client-go, with typed models of its own.

Each test drives localcloud the way lightkube's users do (its AsyncClient over HTTPS with the
server's kubeconfig) and asserts what kube-apiserver answers.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import cast

import pytest
from lightkube import ApiError, AsyncClient, KubeConfig
from lightkube.models.apps_v1 import DeploymentSpec
from lightkube.models.core_v1 import Container, PodSpec, PodTemplateSpec
from lightkube.models.meta_v1 import LabelSelector, ObjectMeta
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.core_v1 import ConfigMap, Pod, PodStatus
from lightkube.resources.events_v1 import Event

from localcloud.kube.server import KubeApiServer


@pytest.fixture
async def lightkube(kube: KubeApiServer, tmp_path: Path) -> AsyncIterator[AsyncClient]:
    config = KubeConfig.from_file(tmp_path / "kubeconfig")
    client = AsyncClient(config=config)
    try:
        yield client
    finally:
        await client.close()


def config_map(data: dict[str, str]) -> ConfigMap:
    return ConfigMap(metadata=ObjectMeta(name="settings", namespace="default"), data=data)


def pod(name: str) -> Pod:
    return Pod(
        metadata=ObjectMeta(name=name, namespace="default"),
        spec=PodSpec(containers=[Container(name="app", image="nginx")]),
    )


def managers(obj: ConfigMap | Pod) -> dict[str, str]:
    """manager → operation of each managedFields entry."""
    assert obj.metadata is not None
    assert obj.metadata.managedFields is not None
    return {entry.manager or "": entry.operation or "" for entry in obj.metadata.managedFields}


async def test_server_side_apply_creates_owns_removes_and_conflicts(
    lightkube: AsyncClient,
) -> None:
    """apply creates the absent object under its field manager, drops a field the same manager
    stops applying, answers a second manager's different value with 409 and its causes, and
    hands the field over when forced."""
    created = await lightkube.apply(config_map({"a": "1", "b": "2"}), field_manager="alpha")
    assert created.data == {"a": "1", "b": "2"}
    assert managers(created) == {"alpha": "Apply"}

    trimmed = await lightkube.apply(config_map({"a": "1"}), field_manager="alpha")
    assert trimmed.data == {"a": "1"}

    with pytest.raises(ApiError) as conflict:
        await lightkube.apply(config_map({"a": "9"}), field_manager="beta")
    status = conflict.value.status
    assert (status.code, status.reason) == (409, "Conflict")
    assert status.details is not None
    assert status.details.causes is not None
    assert [(c.field, c.reason) for c in status.details.causes] == [
        (".data.a", "FieldManagerConflict")
    ]
    assert 'conflict with "alpha"' in (status.details.causes[0].message or "")

    forced = await lightkube.apply(config_map({"a": "9"}), field_manager="beta", force=True)
    assert forced.data == {"a": "9"}
    assert managers(forced) == {"alpha": "Apply", "beta": "Apply"}


async def test_list_then_watch_from_the_lists_resource_version(lightkube: AsyncClient) -> None:
    """A watch started from a list's resourceVersion sees exactly the changes after the list."""
    await lightkube.create(pod("before"))
    listed = lightkube.list(Pod, namespace="default")
    assert [p.metadata.name async for p in listed if p.metadata] == ["before"]
    version = listed.resourceVersion
    assert version
    await lightkube.create(pod("after"))
    await lightkube.delete(Pod, "before", namespace="default")
    seen: list[tuple[str, str | None]] = []
    async for kind, obj in lightkube.watch(Pod, namespace="default", resource_version=version):
        seen.append((kind, obj.metadata.name if obj.metadata else None))
        if len(seen) == 2:
            break
    assert seen == [("ADDED", "after"), ("DELETED", "before")]


async def test_deployment_whose_selector_misses_its_template_is_invalid(
    lightkube: AsyncClient,
) -> None:
    """A Deployment's selector must match its template's labels: 422 with the field named."""
    deployment = Deployment(
        metadata=ObjectMeta(name="web", namespace="default"),
        spec=DeploymentSpec(
            selector=LabelSelector(matchLabels={"app": "web"}),
            template=PodTemplateSpec(
                metadata=ObjectMeta(labels={"app": "other"}),
                spec=PodSpec(containers=[Container(name="app", image="nginx")]),
            ),
        ),
    )
    with pytest.raises(ApiError) as refused:
        await lightkube.create(deployment)
    status = refused.value.status
    assert (status.code, status.reason) == (422, "Invalid")
    assert status.details is not None
    assert status.details.causes is not None
    assert [c.field for c in status.details.causes] == ["spec.template.metadata.labels"]


async def test_events_v1_needs_its_required_fields(lightkube: AsyncClient) -> None:
    """An events.k8s.io/v1 Event without eventTime, reportingController, reportingInstance and
    action is 422 naming each."""
    # lightkube's model wants eventTime as an argument; None leaves it out of the body
    bare = Event(
        metadata=ObjectMeta(name="e1", namespace="default"),
        eventTime=None,  # type: ignore[arg-type]
        reason="Tested",
        type="Normal",
    )
    with pytest.raises(ApiError) as refused:
        await lightkube.create(bare)
    status = refused.value.status
    assert (status.code, status.reason) == (422, "Invalid")
    assert status.details is not None
    assert status.details.causes is not None
    fields = {c.field for c in status.details.causes}
    assert {"eventTime", "reportingController", "reportingInstance", "action"} <= fields


async def test_apply_to_the_status_subresource_updates_and_never_creates(
    lightkube: AsyncClient,
) -> None:
    """An apply to /status sets only status fields (the spec stays, the manager owns the
    condition) and, as for every subresource, is 404 for an absent object instead of creating
    it (kube-apiserver's status storage never creates on update)."""
    gate = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web", "namespace": "default"},
        "status": {"conditions": [{"type": "example.com/gate", "status": "True"}]},
    }
    with pytest.raises(ApiError) as absent:
        await lightkube.apply(
            cast(PodStatus, PodStatus.from_dict(gate)), name="web", field_manager="gatekeeper"
        )
    assert (absent.value.status.code, absent.value.status.message) == (
        404,
        'pods "web" not found',
    )

    await lightkube.create(pod("web"))
    applied = await lightkube.apply(
        cast(PodStatus, PodStatus.from_dict(gate)), name="web", field_manager="gatekeeper"
    )
    assert applied.status is not None
    assert applied.status.conditions is not None
    assert [(c.type, c.status) for c in applied.status.conditions] == [("example.com/gate", "True")]
    stored = await lightkube.get(Pod, "web", namespace="default")
    assert stored.spec is not None
    assert [c.name for c in stored.spec.containers] == ["app"]
    assert stored.metadata is not None
    assert stored.metadata.managedFields is not None
    (entry,) = [e for e in stored.metadata.managedFields if e.manager == "gatekeeper"]
    assert (entry.operation, entry.subresource) == ("Apply", "status")
    assert entry.fieldsV1 == {
        "f:status": {
            "f:conditions": {
                'k:{"type":"example.com/gate"}': {".": {}, "f:type": {}, "f:status": {}}
            }
        }
    }
