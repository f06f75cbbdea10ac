"""Kubernetes JSONPath as CRD printer columns use it (k8s.io/client-go/util/jsonpath)."""

from __future__ import annotations

import pytest

from localcloud.kube import jsonpath
from localcloud.kube.errors import BadRequest

CLAIM = {
    "metadata": {
        "name": "default-x7k2p",
        "labels": {"node.kubernetes.io/instance-type": "m6g.large", "plain": "yes"},
    },
    "status": {
        "conditions": [
            {"type": "Launched", "status": "True", "order": 1},
            {"type": "Ready", "status": "False", "order": 2},
        ]
    },
}


def test_escaped_dots_name_one_label_key() -> None:
    """`\\.` keeps a dot inside a map key, as in `.metadata.labels.node\\.kubernetes\\.io/...`."""
    path = r".metadata.labels.node\.kubernetes\.io/instance-type"
    assert jsonpath.find(CLAIM, path) == ["m6g.large"]
    assert jsonpath.find(CLAIM, ".metadata.labels.node.kubernetes.io/instance-type") == []


def test_filter_selects_the_matching_list_element() -> None:
    """`[?(@.type=="Ready")]` keeps only the elements whose field equals the literal."""
    assert jsonpath.find(CLAIM, '.status.conditions[?(@.type=="Ready")].status') == ["False"]
    assert jsonpath.find(CLAIM, ".status.conditions[?(@.type!='Ready')].type") == ["Launched"]
    assert jsonpath.find(CLAIM, ".status.conditions[?(@.order > 1)].type") == ["Ready"]
    assert jsonpath.find(CLAIM, ".status.conditions[?(@.missing)].type") == []


def test_indexes_slices_wildcards_and_recursive_descent() -> None:
    """Array indexes (negative too), slices, `[*]`, bracketed names and `..` as client-go
    reads them."""
    assert jsonpath.find(CLAIM, ".status.conditions[-1].type") == ["Ready"]
    assert jsonpath.find(CLAIM, ".status.conditions[0:1].type") == ["Launched"]
    assert jsonpath.find(CLAIM, ".status.conditions[*].type") == ["Launched", "Ready"]
    assert jsonpath.find(CLAIM, "{.metadata['labels'].plain}") == ["yes"]
    assert jsonpath.find(CLAIM, "..order") == [1, 2]
    assert jsonpath.first(CLAIM, ".status.conditions[5].type") is None


def test_malformed_paths_are_a_bad_request() -> None:
    """An unclosed bracket or a filter without `@` is refused, not guessed at."""
    with pytest.raises(BadRequest):
        jsonpath.find(CLAIM, ".status.conditions[0")
    with pytest.raises(BadRequest):
        jsonpath.find(CLAIM, '.status.conditions[?(type=="Ready")]')
