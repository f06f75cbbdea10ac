"""Fuzzing the scheduler's object conversion (issue 13): NodePools, EC2NodeClasses, pods, Nodes
and NodeClaims, well formed with random and adversarial values put anywhere in them, become a
typed value or an InvalidObjectError naming the field, never another exception, and never cost
more than 100 ms of CPU (an object is converted on every round that reads it)."""

from __future__ import annotations

import contextlib
import copy
import time
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler_svc.errors import InvalidObjectError
from scheduler_svc.kube.convert import (
    kubelet_from_k8s,
    node_class_from_k8s,
    node_from_k8s,
    node_from_nodeclaim,
    nodepool_from_k8s,
    pod_from_k8s,
)

CPU_BUDGET_SECONDS = 0.1

REQUIREMENTS = [
    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot", "on-demand"]},
    {"key": "karpenter.k8s.aws/instance-cpu", "operator": "Gt", "values": ["2"]},
    {"key": "kubernetes.io/arch", "operator": "NotIn", "values": ["arm64"]},
]

NODEPOOL = {
    "metadata": {"name": "default"},
    "spec": {
        "weight": 10,
        "limits": {"cpu": "200", "memory": "1000Gi", "nodes": 50},
        "template": {
            "metadata": {"labels": {"team": "a"}},
            "spec": {
                "nodeClassRef": {"group": "daiku.dev", "kind": "EC2NodeClass", "name": "default"},
                "requirements": REQUIREMENTS,
                "taints": [{"key": "dedicated", "value": "a", "effect": "NoSchedule"}],
                "startupTaints": [{"key": "booting", "effect": "NoExecute"}],
            },
        },
    },
}

EC2NODECLASS = {
    "metadata": {"name": "default"},
    "spec": {
        "role": "KarpenterNodeRole-daiku",
        "amiSelectorTerms": [{"alias": "al2023@latest"}, {"id": "ami-123"}],
        "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "daiku"}}],
        "securityGroupSelectorTerms": [{"id": "sg-1"}],
        "kubelet": {
            "maxPods": 110,
            "podsPerCore": 4,
            "systemReserved": {"cpu": "100m", "memory": "100Mi"},
            "kubeReserved": {"cpu": "200m"},
            "evictionHard": {"memory.available": "5%"},
        },
        "blockDeviceMappings": [
            {"deviceName": "/dev/xvda", "rootVolume": True, "ebs": {"volumeSize": "50Gi"}}
        ],
        "userData": "#!/bin/bash",
    },
}

POD = {
    "metadata": {"name": "web-1", "namespace": "default", "labels": {"app": "web"}},
    "spec": {
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "containers": [
            {
                "name": "app",
                "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}},
                "ports": [{"containerPort": 80, "hostPort": 8080, "protocol": "TCP"}],
            }
        ],
        "initContainers": [{"name": "init", "resources": {"requests": {"cpu": "1"}}}],
        "overhead": {"cpu": "10m"},
        "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "a"}],
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": REQUIREMENTS}]
                },
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 10, "preference": {"matchExpressions": REQUIREMENTS[:1]}}
                ],
            },
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "topologyKey": "kubernetes.io/hostname",
                        "labelSelector": {"matchLabels": {"app": "web"}},
                    }
                ]
            },
        },
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {
                    "matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}]
                },
            }
        ],
    },
}

NODE = {
    "metadata": {
        "name": "ip-10-0-0-1.ec2.internal",
        "labels": {"node.kubernetes.io/instance-type": "m5.large"},
    },
    "spec": {
        "providerID": "aws:///us-east-1a/i-1",
        "taints": [{"key": "dedicated", "value": "a", "effect": "NoSchedule"}],
    },
    "status": {"allocatable": {"cpu": "1930m", "memory": "7Gi", "pods": "29"}},
}

NODECLAIM = {
    "metadata": {"name": "default-abcde", "labels": {"karpenter.sh/capacity-type": "spot"}},
    "spec": {
        "requirements": REQUIREMENTS,
        "resources": {"requests": {"cpu": "2", "memory": "1Gi"}},
        "taints": [{"key": "dedicated", "value": "a", "effect": "NoSchedule"}],
    },
    "status": {"capacity": {"cpu": "2", "memory": "8Gi"}, "allocatable": {"cpu": "1930m"}},
}

# Values an attacker or a typo puts where a quantity, a name or a number belongs.
ADVERSARIAL_TEXTS = [
    "",
    "-5",
    "1e20000000",
    "1e-20000000",
    "9" * 5000,
    "1" + "0" * 64,
    "NaN",
    "inf",
    "1Ei",
    "8Ei",
    "\u0663",
    "\x00",
    "x" * 100_000,
    ".5e-3",
    "+",
    "In",
    "Gt",
    "NoSchedule",
    "a/b/c",
]
ADVERSARIAL_TEXT = st.sampled_from(ADVERSARIAL_TEXTS)
# json.loads refuses integers past 4300 digits (Python's int/str limit): 10**4000 is the
# largest number the API server's JSON can hand the scheduler.
ADVERSARIAL_NUMBER = st.one_of(
    st.integers(),
    st.sampled_from([10**4000, -(10**4000), 2**63, -1, 0]),
    st.floats(allow_nan=True, allow_infinity=True),
)
LEAF = st.one_of(
    st.none(), st.booleans(), ADVERSARIAL_NUMBER, st.text(max_size=12), ADVERSARIAL_TEXT
)
JUNK = st.recursive(
    LEAF,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.one_of(st.text(max_size=8), ADVERSARIAL_TEXT), children, max_size=4),
    ),
    max_leaves=12,
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value inside a JSON-like document (dict keys and list indexes)."""
    found = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _paths(item, (*prefix, index))
    return found


@st.composite
def mutated(draw: st.DrawFn, base: dict[str, Any]) -> dict[str, Any]:
    """`base` with one to four of its values (anywhere) replaced by junk, or junk added beside
    them under a new key."""
    document = copy.deepcopy(base)
    paths = _paths(document)
    junk = st.one_of(ADVERSARIAL_TEXT, ADVERSARIAL_NUMBER, JUNK)
    for _ in range(draw(st.integers(1, 4))):
        path = draw(st.sampled_from(paths))
        # An earlier replacement may have removed what this path leads through.
        with contextlib.suppress(KeyError, IndexError, TypeError):
            parent: Any = document
            for step in path[:-1]:
                parent = parent[step]
            if isinstance(parent, dict) and draw(st.booleans()):
                parent[draw(st.text(max_size=8))] = draw(junk)
            else:
                parent[path[-1]] = draw(junk)
    return document


CONVERSIONS: dict[str, tuple[dict[str, Any], Callable[[Any], object]]] = {
    "NodePool": (NODEPOOL, nodepool_from_k8s),
    "EC2NodeClass": (EC2NODECLASS, node_class_from_k8s),
    "EC2NodeClass kubelet": (EC2NODECLASS, kubelet_from_k8s),
    "Pod": (POD, pod_from_k8s),
    "Node": (NODE, node_from_k8s),
    "NodeClaim": (NODECLAIM, node_from_nodeclaim),
}


def _converts_or_says_why(convert: Callable[[Any], object], document: Any) -> None:
    started = time.process_time()
    try:
        converted: object = convert(document)
    except InvalidObjectError as error:
        converted = error
    spent = time.process_time() - started
    if isinstance(converted, InvalidObjectError):
        assert str(converted).startswith(converted.kind)  # kind, object, field, reason
    else:
        assert converted is not None or convert is kubelet_from_k8s
    assert spent < CPU_BUDGET_SECONDS, f"{spent:.3f} s of CPU for {document!r:.300}"


@pytest.mark.parametrize("kind", sorted(CONVERSIONS))
def test_the_well_formed_objects_convert(kind: str) -> None:
    """The fuzzer's starting points are valid: mutations, not the bases, make the errors."""
    base, convert = CONVERSIONS[kind]
    assert convert(copy.deepcopy(base)) is not None or convert is kubelet_from_k8s


def _replaced(document: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    changed = copy.deepcopy(document)
    parent: Any = changed
    for step in path[:-1]:
        parent = parent[step]
    parent[path[-1]] = value
    return changed


@pytest.mark.parametrize("kind", sorted(CONVERSIONS))
def test_every_field_holding_each_adversarial_value_converts_or_fails_clearly(kind: str) -> None:
    """Systematically, not by chance: each adversarial text and number (a twenty-million-digit
    exponent, a 4000-digit integer, NaN, a 100 kB string, ...) in each field of the object."""
    base, convert = CONVERSIONS[kind]
    values = [*ADVERSARIAL_TEXTS, 10**4000, -(10**4000), 2**63, -1, float("nan"), float("inf")]
    for path in _paths(base):
        for value in values:
            _converts_or_says_why(convert, _replaced(base, path, value))


@pytest.mark.parametrize("kind", sorted(CONVERSIONS))
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_adversarial_objects_convert_or_fail_clearly_and_fast(
    kind: str, data: st.DataObject
) -> None:
    """An object with random and adversarial values anywhere converts, or raises an
    InvalidObjectError; no other exception escapes and no conversion costs 100 ms of CPU."""
    base, convert = CONVERSIONS[kind]
    _converts_or_says_why(convert, data.draw(mutated(base)))


@pytest.mark.parametrize("kind", sorted(CONVERSIONS))
@settings(max_examples=50, deadline=None)
@given(document=JUNK)
def test_arbitrary_documents_convert_or_fail_clearly_and_fast(kind: str, document: Any) -> None:
    """Whatever JSON-like value arrives in place of the object: a typed value or an
    InvalidObjectError, fast."""
    _base, convert = CONVERSIONS[kind]
    _converts_or_says_why(convert, document)
