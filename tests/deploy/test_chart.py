"""charts/daiku renders, with Helm's own Go library (helm-python-sdk), into objects that
Kubernetes accepts under strict validation for several value sets; its default is the kustomize
overlay deploy/overlays/default in substance (and scheduler.enabled=false the standalone one);
values.schema.json refuses bad values with the key named; generated secrets are usable."""

from __future__ import annotations

import base64
import copy
import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import helm_python as helm
import kubernetes_validate  # type: ignore[import-untyped]
import pytest
import yaml
from cryptography import x509

from actuator_svc.metrics import ActuatorMetrics
from scheduler_svc.metrics import SchedulerMetrics
from tests.deploy.test_manifests import _rendered, needs_kubectl

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "daiku"
KUBERNETES_VERSION = "1.32.0"
RELEASE, NAMESPACE = "daiku", "daiku"

# What deploy/overlays/default sets, as values.
OVERLAY_SETTINGS: dict[str, Any] = {
    "settings": {"clusterName": "my-cluster", "region": "us-west-2"},
    "actuator": {
        "serviceAccount": {"roleArn": "arn:aws:iam::111122223333:role/daiku-actuator-my-cluster"}
    },
}
VALUE_SETS: dict[str, dict[str, Any]] = {
    "default": OVERLAY_SETTINGS,
    "actuator-standalone": {**OVERLAY_SETTINGS, "scheduler": {"enabled": False}},
    "everything": {
        "settings": {"clusterName": "prod", "region": "eu-west-1", "interruptionQueue": "q"},
        "namespace": {"create": True},
        "image": {"digest": "sha256:" + "a" * 64},
        "imagePullSecrets": [{"name": "registry"}],
        "commonLabels": {"team": "platform"},
        "scheduler": {
            "extraArgs": ["--log-level=DEBUG"],
            "tolerations": [{"key": "critical", "operator": "Exists"}],
            "nodeSelector": {"role": "system"},
        },
        "actuator": {
            "tls": {"generate": True},
            "token": {"generate": True},
            "serviceAccount": {"annotations": {"example.com/owner": "platform"}},
            "networkPolicy": {"clients": [{"namespaceSelector": {"matchLabels": {"a": "b"}}}]},
        },
        "monitoring": {"serviceMonitor": {"enabled": True}, "prometheusRule": {"enabled": True}},
    },
    "pod-identity-no-policies": {
        "settings": {"clusterName": "c", "region": "us-east-1"},
        "networkPolicy": {"enabled": False},
        "scheduler": {"podDisruptionBudget": {"enabled": False}, "replicas": 1},
        "actuator": {"podDisruptionBudget": {"minAvailable": "50%"}},
    },
}
MONITORING_KINDS = {"ServiceMonitor", "PrometheusRule"}


@cache
def _render_cached(values_yaml: str) -> tuple[dict[str, Any], ...]:
    with helm.Chart.load(CHART) as chart:
        manifests = chart.render(yaml.safe_load(values_yaml), name=RELEASE, namespace=NAMESPACE)
    return tuple(
        document for text in manifests.values() for document in yaml.safe_load_all(text) if document
    )


def render(values: dict[str, Any]) -> list[dict[str, Any]]:
    """The chart's templates rendered as `helm template` would (no CRDs)."""
    return copy.deepcopy(list(_render_cached(yaml.safe_dump(values, sort_keys=True))))


def crds() -> list[dict[str, Any]]:
    with helm.Chart.load(CHART) as chart:
        return [yaml.safe_load(crd["data"]) for crd in chart.crds]


def _key(obj: dict[str, Any]) -> tuple[str, str, str]:
    return (obj["kind"], obj["metadata"].get("namespace", ""), obj["metadata"]["name"])


@pytest.mark.parametrize("value_set", VALUE_SETS)
def test_every_rendered_object_passes_strict_validation(value_set: str) -> None:
    """Every object the chart renders for the value set is valid Kubernetes 1.32 with unknown
    fields refused (prometheus-operator kinds are checked by the monitoring test)."""
    objects = render(VALUE_SETS[value_set])
    assert objects
    for obj in objects:
        if obj["kind"] in MONITORING_KINDS:
            continue
        try:
            kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.ValidationError as error:
            pytest.fail(f"{_key(obj)}: {error.message} at {list(error.path)}")


def test_the_chart_lints_clean_under_strict() -> None:
    """`helm lint --strict` finds no warning or error with the overlay's settings."""
    report = helm.lint(CHART, OVERLAY_SETTINGS, strict=True, kube_version="v1.32.0")
    assert report["errors"] == []
    assert [m for m in report["messages"] if m["severity"] >= 2] == []


def test_the_chart_ships_deploy_crds() -> None:
    """The chart's crds/ are deploy/crds, object for object."""
    ours = sorted(
        (yaml.safe_load(p.read_text()) for p in (ROOT / "deploy" / "crds").glob("*.yaml")),
        key=lambda c: c["metadata"]["name"],
    )
    assert sorted(crds(), key=lambda c: c["metadata"]["name"]) == ours


_KUSTOMIZE_HASH = re.compile(r"^(daiku-settings)-[a-z0-9]{10}$")


def _substance(obj: dict[str, Any]) -> dict[str, Any]:
    """The object without what only says who rendered it: labels, annotations (but a
    ServiceAccount's, which carry the IAM role), pod-template metadata, kustomize's
    ConfigMap-name hash."""
    obj = copy.deepcopy(obj)
    metadata = obj["metadata"]
    metadata.pop("labels", None)
    if obj["kind"] != "ServiceAccount":
        metadata.pop("annotations", None)
    metadata["name"] = _KUSTOMIZE_HASH.sub(r"\1", metadata["name"])
    template = obj.get("spec", {}).get("template")
    if obj["kind"] == "Deployment" and template:
        template.pop("metadata", None)
        for container in template["spec"]["containers"]:
            for variable in container.get("env", []):
                ref = variable.get("valueFrom", {}).get("configMapKeyRef")
                if ref:
                    ref["name"] = _KUSTOMIZE_HASH.sub(r"\1", ref["name"])
    return obj


def _by_key(objects: list[dict[str, Any]]) -> dict[tuple[str, str, str], dict[str, Any]]:
    return {_key(_substance(o)): _substance(o) for o in objects}


@needs_kubectl
@pytest.mark.parametrize(
    ("value_set", "overlay"),
    [("default", "default"), ("actuator-standalone", "actuator-standalone")],
)
def test_the_chart_renders_the_kustomize_overlay_in_substance(value_set: str, overlay: str) -> None:
    """With the overlay's settings the chart renders the overlay's objects — same kinds, names
    and namespaces, same RBAC rules and bindings, same pod specs, Services, PDBs, policies and
    settings — apart from labels and annotations; the CRDs come from the chart's crds/. The
    overlay's Namespace is `helm install --create-namespace` (or namespace.create=true)."""
    chart = render(VALUE_SETS[value_set])
    if overlay == "default":
        chart += crds()
    expected = _by_key([o for o in _rendered(overlay) if o["kind"] != "Namespace"])
    got = _by_key(chart)
    assert sorted(got) == sorted(expected)
    for key, obj in expected.items():
        assert got[key] == obj, key


@needs_kubectl
def test_namespace_create_renders_the_overlays_namespace() -> None:
    """namespace.create=true renders the overlay's Namespace with its Pod Security labels."""
    [namespace] = [o for o in _rendered("default") if o["kind"] == "Namespace"]
    [ours] = [
        o
        for o in render({**OVERLAY_SETTINGS, "namespace": {"create": True}})
        if o["kind"] == "Namespace"
    ]
    assert ours["metadata"]["name"] == namespace["metadata"]["name"]
    assert namespace["metadata"]["labels"].items() <= ours["metadata"]["labels"].items()


@pytest.mark.parametrize(
    ("values", "complaint"),
    [
        ({"settings": {"region": "us-west-2"}}, "clusterName"),
        ({"settings": {"clusterName": "c", "region": "Oregon"}}, "/settings/region"),
        ({**OVERLAY_SETTINGS, "actuator": {"replicaz": 3}}, "replicaz"),
        ({**OVERLAY_SETTINGS, "image": {"pullPolicy": "Sometimes"}}, "/image/pullPolicy"),
        ({**OVERLAY_SETTINGS, "scheduler": {"extraArgs": ["log-level=DEBUG"]}}, "extraArgs"),
        (
            {**OVERLAY_SETTINGS, "actuator": {"serviceAccount": {"roleArn": "daiku"}}},
            "roleArn",
        ),
    ],
)
def test_the_values_schema_refuses_bad_values_naming_the_key(
    values: dict[str, Any], complaint: str
) -> None:
    """A missing cluster name, a malformed region, a misspelt key, an unknown pull policy, a
    flag without dashes or a malformed role ARN fail the render with the key in the message."""
    with helm.Chart.load(CHART) as chart, pytest.raises(helm.HelmValuesError, match=complaint):
        chart.validate_schema(values)


def test_the_schema_describes_exactly_the_keys_of_values_yaml() -> None:
    """values.schema.json has a property, with a description, for every setting of values.yaml
    and none that values.yaml leaves out (so `helm show values` is the whole reference)."""
    schema = json.loads((CHART / "values.schema.json").read_text())
    values = yaml.safe_load((CHART / "values.yaml").read_text())

    def compare(node: dict[str, Any], schema_node: dict[str, Any], path: str) -> None:
        properties = schema_node["properties"]
        assert set(node) == set(properties), path
        for name, value in node.items():
            if "properties" in properties[name]:
                compare(value, properties[name], f"{path}{name}.")
            else:
                assert properties[name].get("description"), f"{path}{name}"

    compare(values, schema, "")


def _generated_secret(name: str) -> dict[str, str]:
    [secret] = [
        o
        for o in render(VALUE_SETS["everything"])
        if o["kind"] == "Secret" and o["metadata"]["name"] == name
    ]
    return {key: base64.b64decode(value).decode() for key, value in secret["data"].items()}


def test_a_generated_tls_secret_serves_the_actuator_service_name() -> None:
    """actuator.tls.generate makes a certificate for the actuator Service's DNS name, signed
    by the ca.crt the scheduler trusts, with its key."""
    data = _generated_secret("daiku-actuator-tls")
    certificate = x509.load_pem_x509_certificate(data["tls.crt"].encode())
    ca = x509.load_pem_x509_certificate(data["ca.crt"].encode())
    certificate.verify_directly_issued_by(ca)
    names = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert f"daiku-actuator.{NAMESPACE}.svc" in names.get_values_for_type(x509.DNSName)
    assert data["tls.key"].startswith("-----BEGIN RSA PRIVATE KEY-----")


def test_a_generated_token_is_long_and_random() -> None:
    """actuator.token.generate makes a 64-character alphanumeric token."""
    assert re.fullmatch(r"[A-Za-z0-9]{64}", _generated_secret("daiku-actuator-token")["token"])


def _metric_names() -> set[str]:
    """Every series name the two services export (counters with _total, histograms' parts)."""
    names: set[str] = set()
    for registry in (SchedulerMetrics().registry, ActuatorMetrics().registry):
        for family in registry.collect():
            suffixes = {
                "counter": ("_total",),
                "histogram": ("_bucket", "_sum", "_count"),
            }.get(family.type, ("",))
            names.update(family.name + suffix for suffix in suffixes)
    return names


def test_monitoring_objects_scrape_both_services_and_alert_on_real_metrics() -> None:
    """The ServiceMonitor selects the actuator's Service and the scheduler's metrics Service
    by a port both name `metrics`; every metric a PrometheusRule expression names is one the
    services export."""
    objects = render(VALUE_SETS["everything"])
    [monitor] = [o for o in objects if o["kind"] == "ServiceMonitor"]
    [expression] = monitor["spec"]["selector"]["matchExpressions"]
    services = [
        o
        for o in objects
        if o["kind"] == "Service"
        and o["metadata"]["labels"]["app.kubernetes.io/name"] in expression["values"]
    ]
    assert {s["metadata"]["name"] for s in services} == {
        "daiku-actuator",
        "daiku-scheduler-metrics",
    }
    for service in services:
        assert "metrics" in [port["name"] for port in service["spec"]["ports"]]
    assert [e["port"] for e in monitor["spec"]["endpoints"]] == ["metrics"]
    [rule] = [o for o in objects if o["kind"] == "PrometheusRule"]
    exported = _metric_names()
    named = {
        name
        for group in rule["spec"]["groups"]
        for alert in group["rules"]
        for name in re.findall(r"\bdaiku_[a-z_]+", alert["expr"])
    }
    assert named
    assert named <= exported, named - exported
