"""A list body decoded item by item gives what json.loads gives, and never holds every whole
item at once."""

from __future__ import annotations

import json
import tracemalloc
from typing import Any

import pytest

from scheduler_svc.kube.watch import LIST_ITEM, decode_list


def rebuilt(text: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in decode_list(text):
        if key == LIST_ITEM:
            out.setdefault("items", []).append(value)
        else:
            out[key] = value
    return out


BODIES = [
    {"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "7"}, "items": []},
    {"items": [{"metadata": {"name": "a]b,}"}}, {"x": [1, [2, {"y": "]"}]]}], "metadata": {}},
    {"metadata": {"continue": "abc", "resourceVersion": "9"}, "items": [{"a": None}]},
    {},
]


@pytest.mark.parametrize("body", BODIES)
@pytest.mark.parametrize("indent", [None, 2])
def test_decoding_item_by_item_matches_json_loads(body: dict[str, Any], indent: int | None) -> None:
    """Compact or pretty-printed, items before or after metadata, brackets inside strings:
    the members and items come out exactly as json.loads decodes them."""
    text = json.dumps(body, indent=indent)
    expected = dict(body)
    if expected.get("items") == []:
        del expected["items"]  # an empty array yields no item
    assert rebuilt(text) == expected


def test_items_that_are_not_an_array_are_a_member_and_bad_bodies_raise() -> None:
    """`"items": null` comes out as the member itself; text that is not a JSON object, or is
    cut, raises ValueError."""
    assert list(decode_list('{"items": null, "metadata": {}}')) == [
        ("items", None),
        ("metadata", {}),
    ]
    for bad in ("[]", '{"items": [1, 2', '{"items": [1 2]}', '{"a" 1}', "", '{"a": 1'):
        with pytest.raises(ValueError, match=r"."):
            list(decode_list(bad))


def test_a_large_list_trimmed_while_decoded_never_holds_every_whole_item() -> None:
    """Decoding 2,000 ~8 KiB items and keeping a trimmed copy of each allocates under a fifth
    of what decoding the whole body at once does (json.loads holds every item)."""
    item = {
        "metadata": {"name": "p"},
        "spec": {"env": [{"name": f"V{i}", "value": "x" * 40} for i in range(60)]},
    }
    text = json.dumps({"metadata": {"resourceVersion": "1"}, "items": [item] * 2000})

    tracemalloc.start()
    try:
        whole = json.loads(text)
        _, whole_peak = tracemalloc.get_traced_memory()
        del whole
        tracemalloc.reset_peak()
        base, _ = tracemalloc.get_traced_memory()
        kept = [{"name": v["metadata"]["name"]} for k, v in decode_list(text) if k == LIST_ITEM]
        _, streamed_peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(kept) == 2000
    assert streamed_peak - base < whole_peak / 5
