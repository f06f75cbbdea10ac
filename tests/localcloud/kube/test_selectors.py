"""Label and field selectors as the apiserver parses and matches them."""

import pytest

from localcloud.kube.errors import BadRequest
from localcloud.kube.selectors import (
    label_selector_from_object,
    label_selector_to_string,
    parse_field_selector,
    parse_label_selector,
)

LABELS = {"app": "web", "tier": "front", "canary": "true"}


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("app=web", True),
        ("app==web", True),
        ("app!=web", False),
        ("app!=db", True),
        ("missing!=x", True),
        ("tier in (front,back)", True),
        ("tier in (back)", False),
        ("tier notin (back, middle)", True),
        ("tier notin (front)", False),
        ("canary", True),
        ("!canary", False),
        ("!missing", True),
        ("missing", False),
        ("app=web,tier in (front),!missing", True),
        ("app=web,tier=back", False),
        ("", True),
    ],
)
async def test_label_selector_operators(selector: str, expected: bool) -> None:
    """Each label selector operator matches exactly the labels it names."""
    assert parse_label_selector(selector).matches(LABELS) is expected


async def test_bad_label_selector_names_the_clause() -> None:
    """A malformed clause is a BadRequest that quotes it."""
    with pytest.raises(BadRequest, match="a in b"):
        parse_label_selector("app=web,a in b")


async def test_label_selector_object_round_trip() -> None:
    """matchLabels and matchExpressions convert to an equivalent string selector."""
    selector = {
        "matchLabels": {"app": "web"},
        "matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["front"]},
            {"key": "missing", "operator": "DoesNotExist"},
        ],
    }
    assert label_selector_from_object(selector).matches(LABELS)
    text = label_selector_to_string(selector)
    assert text == "app=web,tier in (front),!missing"
    assert parse_label_selector(text).matches(LABELS)
    assert not parse_label_selector(text).matches({"app": "web"})


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("metadata.name=p1", True),
        ("metadata.namespace==default", True),
        ("spec.nodeName=n1", True),
        ("spec.nodeName!=", True),
        ("status.phase!=Succeeded,status.phase!=Failed", True),
        ("status.phase=Pending", False),
        ("spec.unschedulable=false", True),
        ("spec.missing=", True),
    ],
)
async def test_field_selector(selector: str, expected: bool) -> None:
    """Field selectors compare dotted paths; unset reads as empty (false for unschedulable)."""
    pod = {
        "metadata": {"name": "p1", "namespace": "default"},
        "spec": {"nodeName": "n1"},
        "status": {"phase": "Running"},
    }
    assert parse_field_selector(selector).matches(pod) is expected


async def test_field_selector_booleans_read_lowercase() -> None:
    """A cordoned node matches spec.unschedulable=true."""
    node = {"metadata": {"name": "n"}, "spec": {"unschedulable": True}}
    assert parse_field_selector("spec.unschedulable=true").matches(node)
