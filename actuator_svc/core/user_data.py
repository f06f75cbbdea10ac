"""User data that makes a node register with its claim's labels and taints (AL2023 nodeadm).

The document is MIME multi-part, as nodeadm reads it: the node class's own user data first
(when given), then one `application/node.eks.aws` part holding a NodeConfig. The NodeConfig is
written as JSON, which is valid YAML. Labels and taints go into the kubelet flags
(`--node-labels`, `--register-with-taints`), where the kubelet reads them at registration.
`read_node_registration` parses the document back (the local kubelet emulator uses it).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from email import message_from_string
from email.message import Message
from typing import Any, Final

BOUNDARY: Final = "//daiku//"
NODECONFIG_CONTENT_TYPE: Final = "application/node.eks.aws"


@dataclass(frozen=True, order=True)
class Taint:
    """A node taint; effect is NoSchedule, PreferNoSchedule or NoExecute."""

    key: str
    value: str
    effect: str

    def __str__(self) -> str:
        return (
            f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"
        )


@dataclass(frozen=True)
class ClusterEndpoint:
    """What nodeadm needs to reach the cluster; empty strings when unknown (local runs)."""

    name: str
    api_server_endpoint: str = ""
    certificate_authority: str = ""
    cidr: str = ""


@dataclass(frozen=True)
class NodeRegistration:
    """What a node registers with."""

    labels: Mapping[str, str]
    taints: tuple[Taint, ...]
    max_pods: int | None = None


def node_config(cluster: ClusterEndpoint, registration: NodeRegistration) -> dict[str, Any]:
    """The nodeadm NodeConfig document."""
    flags = []
    if registration.labels:
        labels = ",".join(f"{k}={v}" for k, v in sorted(registration.labels.items()))
        flags.append(f"--node-labels={labels}")
    if registration.taints:
        flags.append(f"--register-with-taints={','.join(str(t) for t in registration.taints)}")
    config: dict[str, Any] = {}
    if registration.max_pods is not None:
        config["maxPods"] = registration.max_pods
    return {
        "apiVersion": "node.eks.aws/v1alpha1",
        "kind": "NodeConfig",
        "spec": {
            "cluster": {
                "name": cluster.name,
                "apiServerEndpoint": cluster.api_server_endpoint,
                "certificateAuthority": cluster.certificate_authority,
                "cidr": cluster.cidr,
            },
            "kubelet": {"config": config, "flags": flags},
        },
    }


def render_user_data(
    cluster: ClusterEndpoint, registration: NodeRegistration, custom_user_data: str = ""
) -> str:
    """The MIME multi-part user data (plain text; EC2 wants it base64-encoded)."""
    parts = ["MIME-Version: 1.0", f'Content-Type: multipart/mixed; boundary="{BOUNDARY}"', ""]
    if custom_user_data.strip():
        kind = (
            "text/x-shellscript" if custom_user_data.startswith("#!") else NODECONFIG_CONTENT_TYPE
        )
        parts += [f"--{BOUNDARY}", f"Content-Type: {kind}", "", custom_user_data.rstrip("\n")]
    parts += [
        f"--{BOUNDARY}",
        f"Content-Type: {NODECONFIG_CONTENT_TYPE}",
        "",
        json.dumps(node_config(cluster, registration), indent=2, sort_keys=True),
        f"--{BOUNDARY}--",
        "",
    ]
    return "\n".join(parts)


def _parse_taint(text: str) -> Taint:
    key_value, _, effect = text.rpartition(":")
    key, _, value = key_value.partition("=")
    return Taint(key=key, value=value, effect=effect)


def _flags(parts: Sequence[Message]) -> list[str]:
    flags: list[str] = []
    for part in parts:
        if part.get_content_type() != NODECONFIG_CONTENT_TYPE:
            continue
        payload = part.get_payload()
        try:
            document = json.loads(payload if isinstance(payload, str) else "")
        except json.JSONDecodeError:
            continue  # a user's own NodeConfig in YAML: not ours to read
        flags += document.get("spec", {}).get("kubelet", {}).get("flags", [])
    return flags


def read_node_registration(user_data: str) -> NodeRegistration:
    """The labels and taints a node registers with, from user data made by render_user_data."""
    message = message_from_string(user_data)
    parts = message.get_payload() if message.is_multipart() else [message]
    labels: dict[str, str] = {}
    taints: list[Taint] = []
    for flag in _flags([p for p in parts if isinstance(p, Message)]):
        name, _, value = flag.partition("=")
        if name == "--node-labels" and value:
            labels.update(item.split("=", 1) for item in value.split(","))  # type: ignore[misc]
        elif name == "--register-with-taints" and value:
            taints += [_parse_taint(item) for item in value.split(",")]
    return NodeRegistration(labels=labels, taints=tuple(taints))
