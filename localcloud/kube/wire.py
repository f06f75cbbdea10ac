"""The wire between aiohttp and the store: query parameters and request bodies in, JSON or
YAML responses and `Status` objects out, reads negotiated by their `Accept` header."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Final

import yaml
from aiohttp import web

from localcloud.kube.errors import BadRequest
from localcloud.kube.objects import from_json, json_bytes
from localcloud.kube.protobuf import decode_object
from localcloud.kube.representations import Representation, negotiate, yaml_bytes

JsonObject = dict[str, Any]
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

JSON_CONTENT_TYPE: Final = "application/json"


def flag(value: str | None) -> bool:
    """A query boolean, in any case (`watch=True`, `watch=1`)."""
    return value is not None and value.strip().lower() in ("true", "1", "yes")


def int_param(value: str | None, name: str) -> int | None:
    """An integer query parameter (None when absent); BadRequest when it is no integer."""
    if value in (None, ""):
        return None
    try:
        return int(value)
    except ValueError as error:
        raise BadRequest(f"invalid value for {name}: {value!r}") from error


def json_response(body: Any, status: int = 200) -> web.Response:
    return web.Response(
        body=json_bytes(body),
        status=status,
        content_type=JSON_CONTENT_TYPE,
    )


def status_success(code: int = 200, details: JsonObject | None = None) -> JsonObject:
    status: JsonObject = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "code": code,
    }
    if details:
        status["details"] = details
    return status


def representation_of(request: web.Request, *, watch: bool = False) -> Representation:
    """What the request's `Accept` header asks a read to be answered as (see `negotiate`)."""
    return negotiate(request.headers.get("Accept", ""), watch=watch)


def yaml_response(body: Any) -> web.Response:
    return web.Response(body=yaml_bytes(body), content_type="application/yaml")


async def read_body(request: web.Request) -> JsonObject:
    """The request body: JSON, YAML or the protobuf kubectl sends; BadRequest otherwise."""
    raw = await request.read()
    if not raw.strip():
        return {}
    content_type = request.content_type
    if content_type == "application/vnd.kubernetes.protobuf":
        return decode_object(raw)
    try:
        body = yaml.safe_load(raw) if "yaml" in content_type else from_json(raw)
    except (ValueError, yaml.YAMLError) as error:
        raise BadRequest(f"the request body is not valid {content_type}: {error}") from error
    if not isinstance(body, dict | list):
        raise BadRequest("the request body must be a JSON object")
    return body  # type: ignore[return-value]  # lists only reach the JSON-patch path
