"""Tags daiku puts on instances, volumes and launch templates, and EC2's rules for them."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

CLUSTER_TAG: Final = "daiku.dev/cluster"
NODEPOOL_TAG: Final = "daiku.dev/nodepool"
NODECLAIM_TAG: Final = "daiku.dev/nodeclaim"
NODECLASS_TAG: Final = "daiku.dev/nodeclass"
NAME_TAG: Final = "Name"
RESERVED_PREFIXES: Final = ("daiku.dev/", "kubernetes.io/cluster/", "aws:")
MAX_TAGS_PER_RESOURCE: Final = 50
MAX_KEY_LENGTH: Final = 128
MAX_VALUE_LENGTH: Final = 256
# EC2 accepts letters, digits, spaces and + - = . _ : / @ in keys and values (the rule that also
# holds when tags are exposed through instance metadata).
_ALLOWED = re.compile(r"^[\w\s+\-=.:/@]*$", re.UNICODE)


class TagError(ValueError):
    """A tag breaks EC2's rules or overrides a reserved key; `field` names the offending tag."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


def cluster_tag_key(cluster_name: str) -> str:
    """The tag that marks a resource as owned by the Kubernetes cluster."""
    return f"kubernetes.io/cluster/{cluster_name}"


def validate_user_tags(tags: Mapping[str, str], field: str) -> None:
    """Raise TagError unless every tag follows EC2's rules and no key is reserved."""
    for key, value in tags.items():
        where = f"{field}[{key!r}]"
        if not key:
            raise TagError(where, "tag key must not be empty")
        if len(key) > MAX_KEY_LENGTH:
            raise TagError(where, f"tag key is longer than {MAX_KEY_LENGTH} characters")
        if len(value) > MAX_VALUE_LENGTH:
            raise TagError(where, f"tag value is longer than {MAX_VALUE_LENGTH} characters")
        if not _ALLOWED.match(key) or not _ALLOWED.match(value):
            raise TagError(where, "tags may hold only letters, digits, spaces and + - = . _ : / @")
        if key.startswith(RESERVED_PREFIXES):
            raise TagError(where, f"tag key is reserved (prefixes {', '.join(RESERVED_PREFIXES)})")


def resource_tags(
    *,
    cluster_name: str,
    nodepool_name: str,
    nodeclaim_name: str,
    user_tags: Mapping[str, str],
) -> dict[str, str]:
    """The tags of a claim's instance and volumes: the user's, then daiku's reserved ones.

    `Name` defaults to the claim name but the node class may set it; reserved keys always win.
    """
    tags = {NAME_TAG: nodeclaim_name, **user_tags}
    tags.update(
        {
            CLUSTER_TAG: cluster_name,
            NODEPOOL_TAG: nodepool_name,
            NODECLAIM_TAG: nodeclaim_name,
            cluster_tag_key(cluster_name): "owned",
        }
    )
    if len(tags) > MAX_TAGS_PER_RESOURCE:
        raise TagError("node_class.tags", f"more than {MAX_TAGS_PER_RESOURCE} tags in total")
    return tags
