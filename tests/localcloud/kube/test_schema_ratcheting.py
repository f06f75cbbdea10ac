"""CEL rules on updates: unchanged values ratchet (as kube-apiserver), changed ones are checked."""

from __future__ import annotations

from localcloud.kube.schema import JsonObject, Violation, validate

SCHEMA: JsonObject = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "properties": {
                "size": {
                    "type": "integer",
                    "x-kubernetes-validations": [
                        {"rule": "self <= 10", "message": "size must be at most 10"}
                    ],
                },
                "name": {
                    "type": "string",
                    "x-kubernetes-validations": [
                        {"rule": "self == oldSelf", "message": "name is immutable"}
                    ],
                },
            },
        },
        "status": {"type": "object", "properties": {"phase": {"type": "string"}}},
    },
}


def obj(size: int, name: str = "a", phase: str = "") -> JsonObject:
    return {"spec": {"size": size, "name": name}, "status": {"phase": phase}}


def messages(found: list[Violation]) -> list[str]:
    return [v.message for v in found]


def test_a_rule_failing_on_an_unchanged_value_does_not_block_other_changes() -> None:
    """An object stored before a rule tightened (size 12 > 10) can still have its status
    written: the unchanged spec is not re-validated."""
    old = obj(12)
    assert messages(validate(obj(12, phase="Ready"), SCHEMA, old)) == []


def test_a_changed_value_is_checked_and_a_new_object_always_is() -> None:
    """Changing the value re-runs its rule, and a create (no old object) checks everything."""
    assert messages(validate(obj(13), SCHEMA, obj(12))) == ["size must be at most 10"]
    assert messages(validate(obj(12), SCHEMA)) == ["size must be at most 10"]
    assert messages(validate(obj(5), SCHEMA, obj(12))) == []


def test_transition_rules_still_see_the_old_value() -> None:
    """`self == oldSelf` refuses a changed name, and the cached result for one pair of values
    never answers for another pair."""
    assert messages(validate(obj(1, "b"), SCHEMA, obj(1, "a"))) == ["name is immutable"]
    assert messages(validate(obj(1, "b"), SCHEMA, obj(1, "b"))) == []
    assert messages(validate(obj(2, "b"), SCHEMA, obj(1, "b"))) == []
    assert messages(validate(obj(2, "c"), SCHEMA, obj(1, "b"))) == ["name is immutable"]
