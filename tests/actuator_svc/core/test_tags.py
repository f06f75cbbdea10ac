"""Tag rules: reserved keys win and cannot be set by the node class; EC2 limits hold."""

import pytest

from actuator_svc.core.tags import TagError, resource_tags, validate_user_tags


def test_resource_tags_carry_the_reserved_keys() -> None:
    """Instances get cluster, pool, claim, cluster-ownership and Name tags plus the user's."""
    tags = resource_tags(
        cluster_name="demo", nodepool_name="default", nodeclaim_name="default-x1",
        user_tags={"team": "web"},
    )  # fmt: skip
    assert tags == {
        "Name": "default-x1",
        "team": "web",
        "daiku.dev/cluster": "demo",
        "daiku.dev/nodepool": "default",
        "daiku.dev/nodeclaim": "default-x1",
        "kubernetes.io/cluster/demo": "owned",
    }


@pytest.mark.parametrize(
    ("tags", "message"),
    [
        ({"daiku.dev/nodeclaim": "x"}, "reserved"),
        ({"kubernetes.io/cluster/other": "owned"}, "reserved"),
        ({"aws:cloudformation": "x"}, "reserved"),
        ({"k" * 129: "v"}, "longer than 128"),
        ({"k": "v" * 257}, "longer than 256"),
        ({"bad#key": "v"}, "only letters"),
        ({"": "v"}, "empty"),
    ],
)
def test_bad_user_tags_are_refused_naming_the_tag(tags: dict[str, str], message: str) -> None:
    """Each broken rule raises TagError naming the field and the key."""
    with pytest.raises(TagError, match=message) as info:
        validate_user_tags(tags, "node_class.tags")
    assert info.value.field.startswith("node_class.tags[")
