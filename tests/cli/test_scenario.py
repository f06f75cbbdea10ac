"""Scenario files for `daiku up`: parsing, errors that name the step and field, merging with
the default objects."""

from __future__ import annotations

import pytest

from daiku_cli.scenario import (
    ApplyStep,
    DeleteStep,
    ObjectRef,
    ScaleStep,
    ScenarioError,
    SleepStep,
    WaitUntilSettledStep,
    default_objects,
    default_scenario,
    merge_objects,
    parse_scenario,
)
from daiku_cli.scenario.model import object_key

FULL = """
apiVersion: daiku.dev/v1
kind: NodePool
metadata: {name: default}
spec: {limits: {cpu: "8"}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec: {replicas: 0}
---
apiVersion: daiku.dev/v1alpha1
kind: Scenario
spec:
  steps:
    - scale: {deployment: shop/web, replicas: 5}
    - waitUntilSettled: {timeoutSeconds: 90}
    - apply: {apiVersion: v1, kind: ConfigMap, metadata: {name: c}}
    - delete: {kind: Deployment, name: shop/web}
    - delete: {kind: NodePool, name: default}
    - sleep: {seconds: 1.5}
    - scale: {deployment: inflate, replicas: 0}
    - waitUntilSettled: {}
"""


def test_every_step_kind_parses_in_order() -> None:
    """Objects come out in file order and each step becomes its typed step."""
    scenario = parse_scenario(FULL, "full.yaml")
    assert [object_key(o) for o in scenario.objects] == [
        ("NodePool", "", "default"),
        ("Deployment", "shop", "web"),
    ]
    assert scenario.steps == (
        ScaleStep(ObjectRef("shop", "web"), 5),
        WaitUntilSettledStep(90.0),
        ApplyStep({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}),
        DeleteStep("Deployment", "web", "shop"),
        DeleteStep("NodePool", "default", None),
        SleepStep(1.5),
        ScaleStep(ObjectRef("default", "inflate"), 0),
        WaitUntilSettledStep(),
    )


def test_a_file_without_a_scenario_document_waits_until_settled() -> None:
    """Objects alone: the one step is a wait until settled."""
    scenario = parse_scenario("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n", "pods.yaml")
    assert scenario.steps == (WaitUntilSettledStep(),)
    assert len(scenario.objects) == 1


def test_a_list_document_contributes_its_items() -> None:
    """`kind: List` documents are unpacked into their items."""
    text = (
        "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Pod, metadata: {name: a}}\n"
    )
    assert [o["metadata"]["name"] for o in parse_scenario(text).objects] == ["a"]


@pytest.mark.parametrize(
    ("steps", "expected"),
    [
        (
            "- scale: {deployment: web, replicas: -1}",
            r"spec.steps\[0\].scale.replicas: expected an integer >= 0",
        ),
        ("- scale: {replicas: 2}", r"spec.steps\[0\].scale.deployment: required"),
        (
            "- scale: {deployment: a/b/c, replicas: 2}",
            r"spec.steps\[0\].scale.deployment: expected NAME or NAMESPACE/NAME",
        ),
        (
            "- sleep: {seconds: 1}\n    - sleep: {seconds: soon}",
            r"spec.steps\[1\].sleep.seconds: expected a number >= 0",
        ),
        (
            "- waitUntilSettled: {timeoutSeconds: 0}",
            r"spec.steps\[0\].waitUntilSettled.timeoutSeconds: expected a number of seconds > 0",
        ),
        (
            "- waitUntilSettled: {timeout: 3}",
            r"spec.steps\[0\].waitUntilSettled: unknown field 'timeout'",
        ),
        ("- explode: {}", r"spec.steps\[0\].explode: unknown step 'explode'"),
        (
            "- {scale: {deployment: a, replicas: 1}, sleep: {seconds: 1}}",
            r"spec.steps\[0\]: expected a mapping with exactly one of",
        ),
        (
            "- apply: {kind: Pod, metadata: {name: p}}",
            r"spec.steps\[0\].apply: apiVersion: required",
        ),
        (
            "- apply: {apiVersion: v1, kind: Pod, metadata: {}}",
            r"spec.steps\[0\].apply \(Pod\): metadata.name: required",
        ),
        ("- delete: {name: x}", r"spec.steps\[0\].delete.kind: required"),
        ("[]", r"spec.steps: expected a non-empty list"),
    ],
)
def test_a_bad_step_is_refused_naming_the_step_and_field(steps: str, expected: str) -> None:
    """Each invalid step raises ScenarioError naming the file, document, step and field."""
    text = f"apiVersion: daiku.dev/v1alpha1\nkind: Scenario\nspec:\n  steps:\n    {steps}\n"
    if steps == "[]":
        text = "apiVersion: daiku.dev/v1alpha1\nkind: Scenario\nspec:\n  steps: []\n"
    with pytest.raises(ScenarioError, match=r"bad.yaml: document 1 \(Scenario\): " + expected):
        parse_scenario(text, "bad.yaml")


SCENARIO_DOC = (
    "apiVersion: daiku.dev/v1alpha1\nkind: Scenario\nspec: {steps: [{sleep: {seconds: 1}}]}\n"
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a: [", r"f.yaml: not valid YAML"),
        ("- 1\n- 2\n", r"f.yaml: document 1: expected a mapping, got list"),
        ("kind: Pod\nmetadata: {name: p}\n", r"f.yaml: document 1: apiVersion: required"),
        (
            "apiVersion: daiku.dev/v1\nkind: Scenario\nspec: {steps: [{sleep: {seconds: 1}}]}\n",
            r"document 1 \(Scenario\): apiVersion must be daiku.dev/v1alpha1",
        ),
        (
            SCENARIO_DOC + "---\n" + SCENARIO_DOC,
            r"document 2: a second Scenario document",
        ),
    ],
)
def test_a_bad_document_is_refused_naming_it(text: str, expected: str) -> None:
    """Malformed YAML, non-objects and a misdeclared or repeated Scenario are named."""
    with pytest.raises(ScenarioError, match=expected):
        parse_scenario(text, "f.yaml")


def test_scenario_objects_replace_defaults_of_the_same_kind_and_name() -> None:
    """A NodePool `default` in the file replaces the default one in place; new objects follow."""
    scenario = parse_scenario(FULL)
    merged = merge_objects(default_objects("daiku"), scenario.objects)
    keys = [object_key(o) for o in merged]
    assert keys == [
        ("EC2NodeClass", "", "default"),
        ("NodePool", "", "default"),
        ("Deployment", "default", "inflate"),
        ("Deployment", "shop", "web"),
    ]
    assert merged[1]["spec"] == {"limits": {"cpu": "8"}}


def test_the_default_scenario_is_seed_000s_scale_up() -> None:
    """Default: inflate (500m/512Mi) at 0 replicas, scaled to 5 then 20, waiting after each;
    the EC2NodeClass selects subnets and security groups by the cluster's discovery tag."""
    scenario = default_scenario("demo")
    node_class, _, inflate = scenario.objects
    assert node_class["spec"]["subnetSelectorTerms"] == [
        {"tags": {"karpenter.sh/discovery": "demo"}}
    ]
    assert node_class["spec"]["securityGroupSelectorTerms"] == [
        {"tags": {"karpenter.sh/discovery": "demo"}}
    ]
    container = inflate["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"]["requests"] == {"cpu": "500m", "memory": "512Mi"}
    assert inflate["spec"]["replicas"] == 0
    scales = [s.replicas for s in scenario.steps if isinstance(s, ScaleStep)]
    assert scales == [5, 20]
    assert isinstance(scenario.steps[-1], WaitUntilSettledStep)
