"""deploy/ renders with kustomize into valid Kubernetes objects that keep daiku's security and
availability promises, and the actuator's IAM policy allows exactly what its code calls."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
OVERLAYS = ("default", "actuator-standalone")
KUBECTL = shutil.which("kubectl")
KUBERNETES_VALIDATE = str(Path(sys.executable).with_name("kubernetes-validate"))
needs_kubectl = pytest.mark.skipif(KUBECTL is None, reason="kubectl (with kustomize) not installed")


@cache
def _rendered_text(overlay: str) -> str:
    assert KUBECTL is not None
    return subprocess.run(
        [KUBECTL, "kustomize", str(DEPLOY / "overlays" / overlay)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def _rendered(overlay: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(_rendered_text(overlay)) if d]


def _by_kind(objects: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in objects if o["kind"] == kind}


@needs_kubectl
@pytest.mark.parametrize("overlay", OVERLAYS)
def test_overlay_passes_kubernetes_validate_strict(overlay: str, tmp_path: Path) -> None:
    """Every object the overlay renders is valid for Kubernetes 1.32, unknown fields refused."""
    rendered = tmp_path / f"{overlay}.yaml"
    rendered.write_text(_rendered_text(overlay))
    result = subprocess.run(
        [KUBERNETES_VALIDATE, "--strict", "--quiet", "-k", "1.32.0", str(rendered)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


@needs_kubectl
def test_default_overlay_contents() -> None:
    """The default overlay holds the five CRDs, both Deployments with two replicas, their
    PDBs, the actuator Service, and cluster settings and IRSA role without placeholders."""
    objects = _rendered("default")
    assert set(_by_kind(objects, "CustomResourceDefinition")) == {
        "capacitybuffers.daiku.dev",
        "nodepools.daiku.dev",
        "nodeclaims.daiku.dev",
        "ec2nodeclasses.daiku.dev",
        "nodeoverlays.daiku.dev",
    }
    deployments = _by_kind(objects, "Deployment")
    assert {name: d["spec"]["replicas"] for name, d in deployments.items()} == {
        "daiku-scheduler": 2,
        "daiku-actuator": 2,
    }
    assert set(_by_kind(objects, "PodDisruptionBudget")) == {"daiku-scheduler", "daiku-actuator"}
    assert _by_kind(objects, "Service")["daiku-actuator"]["spec"]["ports"][0]["port"] == 50051
    (settings,) = _by_kind(objects, "ConfigMap").values()
    assert settings["data"] == {
        "cluster-name": "my-cluster",
        "region": "us-west-2",
        "interruption-queue": "my-cluster",
    }
    role_arn = _by_kind(objects, "ServiceAccount")["daiku-actuator"]["metadata"]["annotations"]
    assert "AWS_ACCOUNT_ID" not in role_arn["eks.amazonaws.com/role-arn"]


@needs_kubectl
def test_standalone_overlay_is_only_the_actuator() -> None:
    """actuator-standalone renders the actuator without scheduler, CRDs or RBAC."""
    kinds = {(o["kind"], o["metadata"]["name"]) for o in _rendered("actuator-standalone")}
    assert ("Deployment", "daiku-actuator") in kinds
    assert not {k for k, _ in kinds} & {"CustomResourceDefinition", "ClusterRole", "Role"}
    assert all("scheduler" not in name for _, name in kinds)


def _containers(deployment: dict[str, Any]) -> list[dict[str, Any]]:
    containers: list[dict[str, Any]] = deployment["spec"]["template"]["spec"]["containers"]
    return containers


@needs_kubectl
@pytest.mark.parametrize("name", ["daiku-scheduler", "daiku-actuator"])
def test_pods_are_restricted_critical_and_spread(name: str) -> None:
    """Each service runs non-root, read-only root FS, no capabilities, RuntimeDefault seccomp,
    with requests and limits, system-cluster-critical priority, spread across zones."""
    deployment = _by_kind(_rendered("default"), "Deployment")[name]
    pod = deployment["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
    assert pod["priorityClassName"] == "system-cluster-critical"
    spread = pod["topologySpreadConstraints"]
    assert any(
        c["topologyKey"] == "topology.kubernetes.io/zone"
        and c["whenUnsatisfiable"] == "DoNotSchedule"
        for c in spread
    )
    for container in _containers(deployment):
        security = container["securityContext"]
        assert security["readOnlyRootFilesystem"] is True
        assert security["allowPrivilegeEscalation"] is False
        assert security["capabilities"]["drop"] == ["ALL"]
        assert set(container["resources"]["requests"]) == {"cpu", "memory"}
        assert set(container["resources"]["limits"]) == {"cpu", "memory"}
        assert "livenessProbe" in container
        assert "readinessProbe" in container


@needs_kubectl
def test_service_commands_and_flags() -> None:
    """The scheduler runs leader-elected against the actuator Service; the actuator listens on
    all interfaces with TLS and a token, probed by gRPC on its plaintext health-only port."""
    deployments = _by_kind(_rendered("default"), "Deployment")
    (scheduler,) = _containers(deployments["daiku-scheduler"])
    assert scheduler["command"] == ["python", "-m", "scheduler_svc"]
    assert "--leader-elect" in scheduler["args"]
    assert "--actuator-address=daiku-actuator.daiku.svc:50051" in scheduler["args"]
    assert "--in-cluster" in scheduler["args"]
    (actuator,) = _containers(deployments["daiku-actuator"])
    assert actuator["command"] == ["python", "-m", "actuator_svc"]
    assert "--listen=0.0.0.0:50051" in actuator["args"]
    assert "--tls-cert-file=/etc/daiku/tls/tls.crt" in actuator["args"]
    assert "--auth-token-file=/etc/daiku/token/token" in actuator["args"]
    assert "--health-port=50052" in actuator["args"]
    ports = {p["name"]: p["containerPort"] for p in actuator["ports"]}
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert actuator[probe]["grpc"] == {"port": ports["health"]} == {"port": 50052}


@needs_kubectl
def test_only_the_scheduler_reaches_the_actuator() -> None:
    """The actuator's NetworkPolicy admits its gRPC port only from scheduler pods."""
    policy = _by_kind(_rendered("default"), "NetworkPolicy")["daiku-actuator"]
    grpc_rules = [
        rule
        for rule in policy["spec"]["ingress"]
        if {"port": 50051, "protocol": "TCP"} in rule["ports"]
    ]
    assert [rule["from"] for rule in grpc_rules] == [
        [{"podSelector": {"matchLabels": {"app.kubernetes.io/name": "daiku-scheduler"}}}]
    ]


@needs_kubectl
def test_actuator_has_no_kubernetes_api_access() -> None:
    """The actuator mounts no API token and no role is bound to its ServiceAccount."""
    objects = _rendered("default")
    actuator = _by_kind(objects, "Deployment")["daiku-actuator"]
    assert actuator["spec"]["template"]["spec"]["automountServiceAccountToken"] is False
    for binding in [o for o in objects if o["kind"] in ("RoleBinding", "ClusterRoleBinding")]:
        assert all(s["name"] != "daiku-actuator" for s in binding["subjects"])


def test_scheduler_rbac_is_one_list_without_wildcards() -> None:
    """The scheduler's permissions live in one file, name every verb and resource, grant
    nothing on Secrets or ConfigMaps, and allow deleting but not creating pods."""
    documents = list(yaml.safe_load_all((DEPLOY / "base/scheduler/rbac.yaml").read_text()))
    rules = [r for d in documents if d["kind"] in ("ClusterRole", "Role") for r in d["rules"]]
    for rule in rules:
        assert "*" not in rule["verbs"] + rule["resources"] + rule["apiGroups"]
        assert not {"secrets", "configmaps"} & set(rule["resources"])
    granted = {
        (group, resource, verb)
        for rule in rules
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
    assert ("", "pods/eviction", "create") in granted
    assert ("coordination.k8s.io", "leases", "update") in granted
    assert ("daiku.dev", "nodeclaims/status", "patch") in granted
    # Deleting pods is granted for the termination's force step only (decision 0008).
    assert ("", "pods", "delete") in granted
    assert ("", "pods", "create") not in granted


# --- IAM ----------------------------------------------------------------------------------

POLICY_VARIABLES = {
    "AWS_PARTITION": "aws",
    "AWS_REGION": "us-west-2",
    "AWS_ACCOUNT_ID": "111122223333",
    "CLUSTER_NAME": "my-cluster",
    "NODE_ROLE_NAME": "KarpenterNodeRole-my-cluster",
    "INTERRUPTION_QUEUE": "my-cluster",
    "OIDC_PROVIDER": "oidc.eks.us-west-2.amazonaws.com/id/EXAMPLE",
}
# EC2 calls made implicitly by the ones the code names: CreateFleet launches with RunInstances
# and tags with CreateTags; launching with an instance profile passes its role.
IMPLIED_ACTIONS = {"ec2:RunInstances", "ec2:CreateTags", "iam:PassRole"}


def _policy(name: str) -> dict[str, Any]:
    text = (DEPLOY / "iam" / name).read_text()
    used = set(re.findall(r"\$\{([A-Z_]+)\}", text))
    assert used <= set(POLICY_VARIABLES), used - set(POLICY_VARIABLES)
    for variable, value in POLICY_VARIABLES.items():
        text = text.replace("${" + variable + "}", value)
    policy: dict[str, Any] = json.loads(text)
    return policy


def _actions(statement: dict[str, Any]) -> set[str]:
    action = statement["Action"]
    return {action} if isinstance(action, str) else set(action)


def _actuator_aws_operations() -> set[str]:
    """The AWS operations actuator_svc's cloud client calls, read from its sources (Ec2Cloud
    joins calls written in several modules of actuator_svc/cloud)."""
    source = "\n".join(
        p.read_text() for p in sorted((ROOT / "actuator_svc" / "cloud").glob("*.py"))
    )
    calls = re.findall(r'_call\(\s*"([A-Za-z]+)",\s*self\._(ec2|sqs|pricing)\.', source)
    return {f"{service}:{operation}" for operation, service in calls}


@pytest.mark.parametrize(
    "name", ["actuator-policy.json", "irsa-trust-policy.json", "pod-identity-trust-policy.json"]
)
def test_iam_documents_are_valid_json_policies(name: str) -> None:
    """Each IAM document, with its placeholders filled, is a 2012-10-17 policy."""
    policy = _policy(name)
    assert policy["Version"] == "2012-10-17"
    assert all(s["Effect"] == "Allow" for s in policy["Statement"])


def test_actuator_policy_allows_exactly_what_the_code_calls() -> None:
    """The actuator policy's actions are the AWS calls in actuator_svc plus the implied ones."""
    operations = _actuator_aws_operations()
    assert "ec2:CreateFleet" in operations  # the source scan found the client's calls
    allowed = set().union(*(_actions(s) for s in _policy("actuator-policy.json")["Statement"]))
    assert allowed == operations | IMPLIED_ACTIONS


def test_actuator_can_only_terminate_or_tag_its_clusters_resources() -> None:
    """Every statement allowing TerminateInstances, CreateTags or creating instances requires
    the daiku.dev/cluster tag of this cluster on the resource or in the request."""
    guarded = {"ec2:TerminateInstances", "ec2:CreateTags", "ec2:CreateLaunchTemplate"}
    for statement in _policy("actuator-policy.json")["Statement"]:
        resources = statement["Resource"]
        resources = [resources] if isinstance(resources, str) else resources
        creates_instances = any(":instance/" in r for r in resources)
        if _actions(statement) & guarded or creates_instances:
            conditions = statement["Condition"]["StringEquals"]
            tag = conditions.get("aws:ResourceTag/daiku.dev/cluster") or conditions.get(
                "aws:RequestTag/daiku.dev/cluster"
            )
            assert tag == "my-cluster", statement["Sid"]


def test_scheduler_rbac_covers_exactly_the_resources_the_scheduler_addresses() -> None:
    """Every resource scheduler_svc.kube.resources names is granted in the RBAC list, and the
    RBAC list grants nothing on a resource the scheduler does not name (subresources aside)."""
    from scheduler_svc.kube import resources

    named = {
        (value.group, value.plural)
        for value in vars(resources).values()
        if isinstance(value, resources.Resource)
    }
    documents = list(yaml.safe_load_all((DEPLOY / "base/scheduler/rbac.yaml").read_text()))
    granted = {
        (group, resource)
        for d in documents
        if d["kind"] in ("ClusterRole", "Role")
        for rule in d["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        if "/" not in resource
    }
    assert named == granted
