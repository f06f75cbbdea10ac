"""What `daiku up` runs with no `--scenario`: seed 000's walk-through on the embedded cloud.

A NodePool `default` (spot, then on-demand; amd64 and arm64; c, m and r families newer than
the second generation, as in Karpenter's getting-started guide), an EC2NodeClass `default` whose
subnets and security groups are found by the tag `karpenter.sh/discovery: <cluster>` (localcloud
tags its subnets and security groups that way), and a Deployment `inflate` of pause pods
requesting 500m / 512Mi, scaled 0 -> 5 -> 20 with a wait until settled after each scale.
"""

from __future__ import annotations

from daiku_cli.scenario.model import (
    KubeObject,
    ObjectRef,
    ScaleStep,
    Scenario,
    Step,
    WaitUntilSettledStep,
)

INFLATE = ObjectRef("default", "inflate")
DEFAULT_STEP_TIMEOUT_SECONDS = 120.0


def default_node_pool() -> KubeObject:
    return {
        "apiVersion": "daiku.dev/v1",
        "kind": "NodePool",
        "metadata": {"name": "default"},
        "spec": {
            "template": {
                "spec": {
                    "nodeClassRef": {
                        "group": "daiku.dev",
                        "kind": "EC2NodeClass",
                        "name": "default",
                    },
                    "requirements": [
                        {
                            "key": "karpenter.sh/capacity-type",
                            "operator": "In",
                            "values": ["spot", "on-demand"],
                        },
                        {
                            "key": "kubernetes.io/arch",
                            "operator": "In",
                            "values": ["amd64", "arm64"],
                        },
                        # As Karpenter's getting-started NodePool: general-purpose families of
                        # recent generations, not burstable micro instances.
                        {
                            "key": "karpenter.k8s.aws/instance-category",
                            "operator": "In",
                            "values": ["c", "m", "r"],
                        },
                        {
                            "key": "karpenter.k8s.aws/instance-generation",
                            "operator": "Gt",
                            "values": ["2"],
                        },
                    ],
                    "expireAfter": "720h",
                }
            },
            "limits": {"cpu": "100"},
            "disruption": {
                "consolidationPolicy": "WhenEmptyOrUnderutilized",
                "consolidateAfter": "30s",
            },
        },
    }


def default_node_class(cluster_name: str) -> KubeObject:
    discovery = {"karpenter.sh/discovery": cluster_name}
    return {
        "apiVersion": "daiku.dev/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": "default"},
        "spec": {
            "role": f"KarpenterNodeRole-{cluster_name}",
            "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "subnetSelectorTerms": [{"tags": dict(discovery)}],
            "securityGroupSelectorTerms": [{"tags": dict(discovery)}],
        },
    }


def inflate_deployment(replicas: int = 0) -> KubeObject:
    """Seed 000's app: pause containers requesting 500m CPU and 512Mi each."""
    labels = {"app": INFLATE.name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": INFLATE.name, "namespace": INFLATE.namespace},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": dict(labels)},
            "template": {
                "metadata": {"labels": dict(labels)},
                "spec": {
                    "terminationGracePeriodSeconds": 0,
                    "containers": [
                        {
                            "name": "inflate",
                            "image": "registry.k8s.io/pause:3.10",
                            "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}},
                        }
                    ],
                },
            },
        },
    }


def default_objects(cluster_name: str) -> tuple[KubeObject, ...]:
    """The objects every run starts from (a scenario's objects replace these by kind+name)."""
    return (default_node_class(cluster_name), default_node_pool(), inflate_deployment(0))


def default_steps() -> tuple[Step, ...]:
    return (
        ScaleStep(INFLATE, 5),
        WaitUntilSettledStep(DEFAULT_STEP_TIMEOUT_SECONDS),
        ScaleStep(INFLATE, 20),
        WaitUntilSettledStep(DEFAULT_STEP_TIMEOUT_SECONDS),
    )


def default_scenario(cluster_name: str) -> Scenario:
    return Scenario(objects=default_objects(cluster_name), steps=default_steps(), name="default")
