"""How kube-apiserver answers a read, chosen by its `Accept` header.

The header lists media ranges in order of preference (kubectl sends a Table, then plain JSON);
the first one served wins:
- `application/json;as=Table;g=meta.k8s.io;v=v1`: a meta.k8s.io Table (kubectl get);
- `application/json;as=PartialObjectMetadata[List];g=meta.k8s.io;v=v1`: only each object's
  metadata (controller-runtime's and client-go's metadata informers);
- `application/yaml`: the object or list as YAML (not for watches, as the real server);
- `application/json`, `application/vnd.kubernetes.protobuf` (answered in JSON, which every
  client that asks for protobuf accepts), `*/*` or no header: JSON.
Nothing served in the header is 406 Not Acceptable.
"""

from __future__ import annotations

import enum
from typing import Any, Final

import yaml

from localcloud.kube.errors import NotAcceptable
from localcloud.kube.objects import JsonObject

META_API_VERSION: Final = "meta.k8s.io/v1"
_JSON_TYPES: Final = frozenset(
    {"application/json", "application/vnd.kubernetes.protobuf", "application/*", "*/*", ""}
)
_YAML_TYPES: Final = frozenset({"application/yaml", "application/x-yaml", "text/yaml"})


class Representation(enum.Enum):
    JSON = "json"
    TABLE = "table"
    METADATA = "metadata"
    YAML = "yaml"


def negotiate(accept: str, *, watch: bool = False) -> Representation:
    """The representation of the first media range in `accept` this server produces."""
    ranges = [part.strip() for part in accept.split(",")] if accept.strip() else [""]
    for media_range in ranges:
        chosen = _representation(media_range, watch=watch)
        if chosen is not None:
            return chosen
    raise NotAcceptable(
        f"only the following media types are accepted: application/json, "
        f"application/yaml, application/vnd.kubernetes.protobuf (asked: {accept})"
    )


_AS_KINDS: Final = {
    "Table": Representation.TABLE,
    "PartialObjectMetadata": Representation.METADATA,
    "PartialObjectMetadataList": Representation.METADATA,
}


def _representation(media_range: str, *, watch: bool) -> Representation | None:
    media_type, *parameters = (p.strip() for p in media_range.split(";"))
    params = dict(p.split("=", 1) for p in parameters if "=" in p)
    as_kind = params.get("as")
    if media_type.lower() in _YAML_TYPES and not as_kind:
        return None if watch else Representation.YAML
    if media_type.lower() not in _JSON_TYPES:
        return None
    if as_kind is None:
        return Representation.JSON
    if params.get("g") not in (None, "meta.k8s.io"):
        return None
    return _AS_KINDS.get(as_kind)


def partial_metadata(obj: JsonObject) -> JsonObject:
    return {
        "kind": "PartialObjectMetadata",
        "apiVersion": META_API_VERSION,
        "metadata": obj.get("metadata") or {},
    }


def partial_metadata_list(list_metadata: JsonObject, items: list[JsonObject]) -> JsonObject:
    return {
        "kind": "PartialObjectMetadataList",
        "apiVersion": META_API_VERSION,
        "metadata": list_metadata,
        "items": [partial_metadata(item) for item in items],
    }


def yaml_bytes(body: Any) -> bytes:
    return yaml.safe_dump(body, sort_keys=False, allow_unicode=True).encode()
